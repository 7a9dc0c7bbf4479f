// The HDF5 reader over the C API. Debian's libhdf5 is built thread-safe (a global lock), so
// readers may run on prefetch/interleave threads; error printing is silenced per call with
// H5E_BEGIN_TRY and the library's messages are folded into est::Error instead.
#include "data/hdf5_reader.h"

#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/file_stream.h"
#include "data/row_position.h"
#include "data/stages.h"

namespace est::data {

namespace {

class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

struct Column {
  std::string name;  // the feature's name
  bool is_labels;
  std::string path;  // in the file
  Handle dataset;
  hid_t memory_type;
  DType dtype;
  Shape row_shape;  // dims after the first
  Tensor chunk;     // [chunk_rows, ...row_shape], rows chunk_begin_.. of the dataset
};

std::pair<hid_t, DType> memory_type(hid_t type, const std::string& file, const std::string& path) {
  H5T_class_t type_class = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  if (type_class == H5T_FLOAT) {
    if (size == 4) return {H5T_NATIVE_FLOAT, DType::kF32};
    if (size == 8) return {H5T_NATIVE_DOUBLE, DType::kF64};
  } else if (type_class == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (!is_signed && size == 1) return {H5T_NATIVE_UINT8, DType::kU8};
    if (size < 4 || (size == 4 && is_signed)) return {H5T_NATIVE_INT32, DType::kI32};
    return {H5T_NATIVE_INT64, DType::kI64};
  }
  throw UnimplementedError("HDF5 dataset '" + path + "' in '" + file +
                           "' has an element type "
                           "(class " +
                           std::to_string(static_cast<int>(type_class)) + ", " +
                           std::to_string(size) +
                           " bytes) that cannot be read as a tensor; "
                           "store floats or integers");
}

class Hdf5Iterator final : public IteratorBase {
 public:
  Hdf5Iterator(const std::string& path, const Hdf5Options& options)
      : path_(path), options_(options), file_(-1, H5Fclose) {
    if (!std::filesystem::exists(path_))
      throw NotFoundError("HDF5 file '" + path_ + "' does not exist; check the path");
    htri_t is_hdf5;
    H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(path_.c_str()); }
    H5E_END_TRY;
    if (is_hdf5 <= 0)
      throw DataLossError("'" + path_ +
                          "' is not an HDF5 file (no HDF5 signature); it is damaged "
                          "or has another format");
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    if (file < 0) throw DataLossError("cannot open HDF5 file '" + path_ + "': it is damaged");
    file_ = Handle(file, H5Fclose);
    for (const std::string& feature : options_.features) open_column(feature, false);
    if (!options_.labels.empty()) open_column(options_.labels, true);
  }

  std::optional<Element> next() override {
    if (row_ >= rows_) return std::nullopt;
    if (row_ < chunk_begin_ || row_ >= chunk_end_) read_chunk();
    int64_t offset = row_ - chunk_begin_;
    Element element;
    for (Column& column : columns_) {
      Tensor row = slice_row(column.chunk, offset);
      if (column.is_labels)
        element.labels = row;
      else
        element.features.emplace(column.name, row);
    }
    ++row_;
    return element;
  }

  int64_t skip(int64_t count) override { return skip_rows(row_, rows_, count); }

  void save(StateWriter& writer) override { save_row(writer, "hdf5", row_); }

  void restore(StateReader& reader) override {
    row_ = restore_row(reader, "hdf5", rows_, [&](int64_t row) {
      return "row " + std::to_string(row) + " of HDF5 datasets with " + std::to_string(rows_) +
             " rows in '" + path_ + "'";
    });
  }

 private:
  void open_column(const std::string& dataset_path, bool is_labels) {
    hid_t dataset;
    H5E_BEGIN_TRY { dataset = H5Dopen2(file_.get(), dataset_path.c_str(), H5P_DEFAULT); }
    H5E_END_TRY;
    if (dataset < 0)
      throw NotFoundError("HDF5 file '" + path_ + "' has no dataset '" + dataset_path +
                          "'; list them with h5ls");
    size_t name_start = dataset_path.find_first_not_of('/');
    Column column{
        .name = name_start == std::string::npos ? dataset_path : dataset_path.substr(name_start),
        .is_labels = is_labels,
        .path = dataset_path,
        .dataset = Handle(dataset, H5Dclose),
        .memory_type = 0,
        .dtype = DType::kF32,
        .row_shape = {},
        .chunk = {}};
    Handle type(H5Dget_type(dataset), H5Tclose);
    std::tie(column.memory_type, column.dtype) = memory_type(type.get(), path_, dataset_path);
    Handle space(H5Dget_space(dataset), H5Sclose);
    int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 1)
      throw InvalidArgumentError("HDF5 dataset '" + dataset_path + "' in '" + path_ +
                                 "' is a scalar; rows need rank >= 1");
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    check_declared_size(dataset, dims, H5Tget_size(type.get()), dataset_path);
    int64_t rows = static_cast<int64_t>(dims[0]);
    for (int a = 1; a < rank; ++a) column.row_shape.push_back(static_cast<int64_t>(dims[a]));
    if (columns_.empty()) {
      rows_ = rows;
    } else if (rows != rows_) {
      throw InvalidArgumentError("HDF5 datasets in '" + path_ + "' disagree on their rows: '" +
                                 columns_[0].path + "' has " + std::to_string(rows_) + ", '" +
                                 dataset_path + "' has " + std::to_string(rows));
    }
    columns_.push_back(std::move(column));
  }

  // A dataset stored without filters cannot declare more bytes than its file holds (nor a
  // size that overflows); checked before any chunk of it is allocated.
  void check_declared_size(hid_t dataset, const std::vector<hsize_t>& dims, size_t element_size,
                           const std::string& dataset_path) const {
    long double declared = static_cast<long double>(element_size);
    for (hsize_t d : dims) declared *= static_cast<long double>(d);
    int filters = 0;
    {
      Handle create(H5Dget_create_plist(dataset), H5Pclose);
      filters = create.valid() ? H5Pget_nfilters(create.get()) : 0;
    }
    std::error_code error;
    const auto file_bytes = static_cast<long double>(std::filesystem::file_size(path_, error));
    const long double limit =
        filters == 0 && !error ? file_bytes : static_cast<long double>(INT64_MAX);
    if (declared <= limit) return;
    char text[64];
    std::snprintf(text, sizeof(text), "%.0Lf", declared);
    throw DataLossError("HDF5 dataset '" + dataset_path + "' in '" + path_ +
                        "' declares dimensions of " + text + " bytes" +
                        (filters == 0
                             ? ", more than the whole file holds (" +
                                   std::to_string(static_cast<uint64_t>(file_bytes)) + " bytes)"
                             : ", more than a 64-bit size can count") +
                        "; the file is damaged");
  }

  void read_chunk() {
    chunk_begin_ = row_;
    chunk_end_ = std::min(rows_, row_ + options_.chunk_rows);
    int64_t count = chunk_end_ - chunk_begin_;
    for (Column& column : columns_) {
      Shape shape{count};
      shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
      column.chunk = allocate_declared(
          static_cast<uint64_t>(ops::num_elements(shape)) * ops::dtype_size(column.dtype),
          [&] {
            return "HDF5 dataset '" + column.path + "' in '" + path_ + "': rows " +
                   std::to_string(chunk_begin_) + " to " + std::to_string(chunk_end_) +
                   " of shape " + ops::shape_str(column.row_shape);
          },
          [&] { return Tensor::empty(shape, column.dtype); });
      std::vector<hsize_t> start(shape.size(), 0), extent(shape.begin(), shape.end());
      start[0] = static_cast<hsize_t>(chunk_begin_);
      Handle file_space(H5Dget_space(column.dataset.get()), H5Sclose);
      Handle memory_space(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                          H5Sclose);
      herr_t status;
      H5E_BEGIN_TRY {
        status = H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                     extent.data(), nullptr);
        if (status >= 0)
          status = H5Dread(column.dataset.get(), column.memory_type, memory_space.get(),
                           file_space.get(), H5P_DEFAULT, column.chunk.raw_data());
      }
      H5E_END_TRY;
      if (status < 0)
        throw DataLossError("cannot read rows " + std::to_string(chunk_begin_) + " to " +
                            std::to_string(chunk_end_) + " of HDF5 dataset '" + column.path +
                            "' in '" + path_ + "': the file is damaged or truncated");
    }
  }

  const std::string& path_;
  const Hdf5Options& options_;
  Handle file_;
  std::vector<Column> columns_;
  int64_t rows_ = 0;
  int64_t row_ = 0;
  int64_t chunk_begin_ = 0, chunk_end_ = 0;
};

class Hdf5Node final : public DatasetNode {
 public:
  Hdf5Node(std::string path, Hdf5Options options)
      : path_(std::move(path)), options_(std::move(options)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override {
    return std::make_unique<Hdf5Iterator>(path_, options_);
  }
  std::string name() const override { return "hdf5_dataset"; }

 private:
  std::string path_;
  Hdf5Options options_;
};

}  // namespace

Dataset hdf5_dataset(std::string path, Hdf5Options options) {
  if (options.features.empty() && options.labels.empty())
    throw InvalidArgumentError("hdf5_dataset: name at least one dataset in Hdf5Options::features");
  if (options.chunk_rows <= 0)
    throw InvalidArgumentError("hdf5_dataset: chunk_rows must be positive, got " +
                               std::to_string(options.chunk_rows));
  for (const std::string& name : options.features)
    if (name.find_first_not_of('/') == std::string::npos)
      throw InvalidArgumentError("hdf5_dataset: '" + name + "' is not a dataset path");
  return Dataset(std::make_shared<Hdf5Node>(std::move(path), std::move(options)));
}

}  // namespace est::data
