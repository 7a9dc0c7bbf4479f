// HDF5 files in memory for Keras's formats (see h5_io.h).
#include "keras/h5_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ops/error.h"

namespace est::keras {
namespace {

using checkpoint::detail::check_id;
using checkpoint::detail::check_status;
using checkpoint::detail::Hdf5Quiet;
using checkpoint::detail::Hid;

Hid core_access() {
  Hid list(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_core(list.get(), 1 << 16, /*backing_store=*/false);
  return list;
}

// A variable-length string type (h5py 3's for str: UTF-8; for bytes: ASCII).
Hid string_type(bool utf8) {
  Hid type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
  return type;
}

}  // namespace

H5File::H5File(Hid file, std::string where) : file_(std::move(file)), where_(std::move(where)) {}

H5File H5File::create() {
  Hdf5Quiet quiet;
  Hid file =
      check_id<UnknownError>(H5Fcreate("keras.h5", H5F_ACC_TRUNC, H5P_DEFAULT, core_access().get()),
                             "keras: cannot create an HDF5 file in memory");
  return H5File(std::move(file), "keras.h5");
}

H5File H5File::open(const std::string& image, const std::string& where) {
  Hdf5Quiet quiet;
  Hid access = core_access();
  if (H5Pset_file_image(access.get(), const_cast<char*>(image.data()), image.size()) < 0 ||
      image.size() < 8 || image.compare(0, 8, "\x89HDF\r\n\x1a\n") != 0)
    throw DataLossError(fmt::format("{} is not an HDF5 file ({} bytes without HDF5's signature)",
                                    where, image.size()));
  // The name only identifies the image to HDF5: it must not be a file that exists.
  static std::atomic<uint64_t> images{0};
  std::string name = fmt::format("est-keras-image-{}", images++);
  hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, access.get());
  if (id < 0)
    throw DataLossError(fmt::format("{}: cannot open it as HDF5 (truncated or damaged?): {}", where,
                                    checkpoint::detail::hdf5_error_text()));
  return H5File(Hid(id), where);
}

H5File H5File::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFoundError(fmt::format("No file or directory found at {}", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return open(bytes.str(), path);
}

std::string H5File::bytes() const {
  Hdf5Quiet quiet;
  check_status<UnknownError>(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), where_ + ": flush");
  ssize_t size = H5Fget_file_image(file_.get(), nullptr, 0);
  if (size < 0) throw UnknownError(where_ + ": cannot get the file image");
  std::string out(static_cast<size_t>(size), '\0');
  H5Fget_file_image(file_.get(), out.data(), out.size());
  return out;
}

void H5File::save_as(const std::string& path) const {
  std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  std::string data = bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw UnavailableError(fmt::format("cannot write {}", path));
}

void H5File::create_group(const std::string& path) {
  Hdf5Quiet quiet;
  size_t position = 0;
  while (position <= path.size()) {
    size_t end = path.find('/', position);
    if (end == std::string::npos) end = path.size();
    std::string prefix = path.substr(0, end);
    if (!prefix.empty() && !checkpoint::detail::link_exists(file_.get(), prefix))
      check_id<UnknownError>(
          H5Gcreate2(file_.get(), prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
          where_ + ": cannot create group " + prefix);
    position = end + 1;
  }
}

void H5File::write_dataset(const std::string& path, const ops::Tensor& value) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) create_group(path.substr(0, slash));
  Hdf5Quiet quiet;
  ops::Tensor host = value.to(ops::Device::cpu());
  Hid space = checkpoint::detail::make_dataspace(host.shape());
  Hid type = checkpoint::detail::file_type(host.dtype());
  Hid dataset =
      check_id<UnknownError>(H5Dcreate2(file_.get(), path.c_str(), type.get(), space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                             where_ + ": cannot create dataset " + path);
  Hid memory = checkpoint::detail::memory_type(host.dtype());
  check_status<UnknownError>(
      H5Dwrite(dataset.get(), memory.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, host.raw_data()),
      where_ + ": cannot write dataset " + path);
}

Hid H5File::open_object(const std::string& path) const {
  if (path != "/" && !checkpoint::detail::link_exists(file_.get(), path))
    throw DataLossError(fmt::format("{}: no \"{}\" in the file", where_, path));
  return check_id<DataLossError>(H5Oopen(file_.get(), path.c_str(), H5P_DEFAULT),
                                 where_ + ": cannot open " + path);
}

void H5File::write_string(const std::string& object, const std::string& name,
                          const std::string& value, bool utf8) {
  Hdf5Quiet quiet;
  Hid target = open_object(object);
  Hid type = string_type(utf8);
  Hid space(H5Screate(H5S_SCALAR));
  Hid attribute = check_id<UnknownError>(
      H5Acreate2(target.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
      where_ + ": cannot create attribute " + name);
  const char* data = value.c_str();
  check_status<UnknownError>(H5Awrite(attribute.get(), type.get(), &data),
                             where_ + ": cannot write attribute " + name);
}

void H5File::write_strings(const std::string& object, const std::string& name,
                           const std::vector<std::string>& values) {
  Hdf5Quiet quiet;
  Hid target = open_object(object);
  Hid type = string_type(false);
  hsize_t count = values.size();
  Hid space(H5Screate_simple(1, &count, nullptr));
  Hid attribute = check_id<UnknownError>(
      H5Acreate2(target.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
      where_ + ": cannot create attribute " + name);
  std::vector<const char*> data;
  for (const auto& value : values) data.push_back(value.c_str());
  if (!data.empty())
    check_status<UnknownError>(H5Awrite(attribute.get(), type.get(), data.data()),
                               where_ + ": cannot write attribute " + name);
}

bool H5File::exists(const std::string& path) const {
  Hdf5Quiet quiet;
  return checkpoint::detail::link_exists(file_.get(), path);
}

std::vector<std::string> H5File::children(const std::string& group) const {
  Hdf5Quiet quiet;
  Hid object = open_object(group);
  H5G_info_t info;
  check_status<DataLossError>(H5Gget_info(object.get(), &info),
                              fmt::format("{}: \"{}\" is not a group", where_, group));
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t size = H5Lget_name_by_idx(object.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0,
                                      H5P_DEFAULT);
    if (size < 0) throw DataLossError(fmt::format("{}: cannot list \"{}\"", where_, group));
    std::string name(static_cast<size_t>(size), '\0');
    H5Lget_name_by_idx(object.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                       name.size() + 1, H5P_DEFAULT);
    out.push_back(name);
  }
  return out;
}

ops::Tensor H5File::read_dataset(const std::string& path) const {
  Hdf5Quiet quiet;
  std::string what = fmt::format("{}: dataset \"{}\"", where_, path);
  if (!checkpoint::detail::dataset_exists(file_.get(), path))
    throw DataLossError(what +
                        " is missing; the file was not written by Keras's save or is "
                        "damaged");
  Hid dataset = check_id<DataLossError>(H5Dopen2(file_.get(), path.c_str(), H5P_DEFAULT), what);
  Hid type = check_id<DataLossError>(H5Dget_type(dataset.get()), what);
  Hid space = check_id<DataLossError>(H5Dget_space(dataset.get()), what);
  ops::DType dtype = checkpoint::detail::dtype_of_type(type.get(), what);
  ops::Shape shape = checkpoint::detail::dataspace_shape(space.get());
  Hid memory = checkpoint::detail::memory_type(dtype);
  uint64_t bytes = checkpoint::detail::checked_dataset_bytes(
      dataset.get(), H5Tget_size(memory.get()), checkpoint::detail::file_size_of(dataset.get()),
      what);
  ops::Tensor out = checkpoint::detail::allocate_for_read(
      bytes, what, [&] { return ops::Tensor::empty(shape, dtype); });
  if (out.numel() > 0)
    check_status<DataLossError>(
        H5Dread(dataset.get(), memory.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.raw_data()), what);
  return out;
}

std::optional<std::string> H5File::read_string(const std::string& object,
                                               const std::string& name) const {
  Hdf5Quiet quiet;
  Hid target = open_object(object);
  if (!checkpoint::detail::has_attribute(target.get(), name.c_str())) return std::nullopt;
  std::vector<std::string> values = read_strings(object, name);
  if (values.size() != 1)
    throw DataLossError(
        fmt::format("{}: attribute \"{}\" of \"{}\" is not one string", where_, name, object));
  return values[0];
}

std::vector<std::string> H5File::read_strings(const std::string& object,
                                              const std::string& name) const {
  Hdf5Quiet quiet;
  Hid target = open_object(object);
  if (!checkpoint::detail::has_attribute(target.get(), name.c_str())) return {};
  {  // h5py writes an empty list as an empty float64 array
    Hid attribute(H5Aopen(target.get(), name.c_str(), H5P_DEFAULT));
    Hid space(H5Aget_space(attribute.get()));
    if (space.valid() && H5Sget_simple_extent_npoints(space.get()) == 0) return {};
  }
  return checkpoint::detail::read_attribute_strings(target.get(), name.c_str(),
                                                    where_ + ": " + object);
}

}  // namespace est::keras
