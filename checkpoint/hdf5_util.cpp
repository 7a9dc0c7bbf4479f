// HDF5 helpers: identifier ownership, error-stack text, dtype/type mapping, attributes and
// dataset listing.
#include "checkpoint/hdf5_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

namespace est::checkpoint::detail {

void Hid::reset() {
  if (id_ >= 0) {
    Hdf5Quiet quiet;
    H5Idec_ref(id_);
  }
  id_ = H5I_INVALID_HID;
}

Hdf5Quiet::Hdf5Quiet() {
  H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5Quiet::~Hdf5Quiet() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }

namespace {

herr_t collect_error(unsigned /*n*/, const H5E_error2_t* error, void* data) {
  auto* messages = static_cast<std::vector<std::string>*>(data);
  if (error->desc && *error->desc) messages->emplace_back(error->desc);
  return 0;
}

}  // namespace

namespace {

// Once HDF5 has failed to load damaged metadata it keeps some internal blocks, and the
// library's own atexit handler then cannot finish closing: it prints "HDF5: infinite loop
// closing library" and a line of package names (only while HDF5's automatic error printing is
// on; every handle of ours is closed by then). A handler registered after HDF5's runs before
// it and turns that printing off, so a program that met a damaged file ends with its own
// message only.
void quiet_hdf5_termination() {
  static std::once_flag registered;
  std::call_once(registered,
                 [] { std::atexit([] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }); });
}

}  // namespace

std::string hdf5_error_text() {
  quiet_hdf5_termination();  // every failure HDF5 reports passes here
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
  if (messages.empty()) return "no details";
  // The walk goes from the API call inward; the innermost lines say what actually failed.
  std::vector<std::string> kept;
  for (auto it = messages.rbegin(); it != messages.rend() && kept.size() < 3; ++it)
    if (std::find(kept.begin(), kept.end(), *it) == kept.end()) kept.push_back(*it);
  std::reverse(kept.begin(), kept.end());
  return fmt::format("{}", fmt::join(kept, "; "));
}

Hid file_access_list(bool for_writing) {
  Hid access = check_id<InternalError>(H5Pcreate(H5P_FILE_ACCESS), "file access list");
#if H5_VERSION_GE(1, 10, 7)
  check_status<InternalError>(H5Pset_file_locking(access.get(), false, true), "file locking");
#endif
  if (for_writing) {
    check_status<InternalError>(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18),
                                "libver bounds");
    check_status<InternalError>(H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG),
                                "close degree");
  }
  return access;
}

namespace {

Hid bool_enum(hid_t base) {
  Hid type = check_id<InternalError>(H5Tenum_create(base), "creating the HDF5 bool enum");
  int8_t value = 0;
  check_status<InternalError>(H5Tenum_insert(type.get(), "FALSE", &value), "bool enum FALSE");
  value = 1;
  check_status<InternalError>(H5Tenum_insert(type.get(), "TRUE", &value), "bool enum TRUE");
  return type;
}

Hid copy_type(hid_t type) { return check_id<InternalError>(H5Tcopy(type), "copying a type"); }

}  // namespace

Hid file_type(ops::DType dtype) {
  switch (dtype) {
    case ops::DType::kF32:
      return copy_type(H5T_IEEE_F32LE);
    case ops::DType::kF64:
      return copy_type(H5T_IEEE_F64LE);
    case ops::DType::kI32:
      return copy_type(H5T_STD_I32LE);
    case ops::DType::kI64:
      return copy_type(H5T_STD_I64LE);
    case ops::DType::kU8:
      return copy_type(H5T_STD_U8LE);
    case ops::DType::kBool:
      return bool_enum(H5T_STD_I8LE);
    case ops::DType::kBF16:
    case ops::DType::kString:
      break;  // refused by the writer, naming the tensor
  }
  throw InternalError("checkpoint: unknown dtype");
}

Hid memory_type(ops::DType dtype) {
  switch (dtype) {
    case ops::DType::kF32:
      return copy_type(H5T_NATIVE_FLOAT);
    case ops::DType::kF64:
      return copy_type(H5T_NATIVE_DOUBLE);
    case ops::DType::kI32:
      return copy_type(H5T_NATIVE_INT32);
    case ops::DType::kI64:
      return copy_type(H5T_NATIVE_INT64);
    case ops::DType::kU8:
      return copy_type(H5T_NATIVE_UINT8);
    case ops::DType::kBool:
      return bool_enum(H5T_NATIVE_INT8);
    case ops::DType::kBF16:
    case ops::DType::kString:
      break;  // never read: no stored type maps to it
  }
  throw InternalError("checkpoint: unknown dtype");
}

std::string describe_type(hid_t type) {
  size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return fmt::format("{}-bit {}integer", bits,
                         H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned " : "");
    case H5T_FLOAT:
      return fmt::format("{}-bit float", bits);
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return fmt::format("{}-bit enum", bits);
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length sequence";
    default:
      return "other";
  }
}

ops::DType dtype_of_type(hid_t type, const std::string& where) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size == 4) return ops::DType::kF32;
      if (size == 8) return ops::DType::kF64;
      break;
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
      if (is_signed && size == 4) return ops::DType::kI32;
      if (is_signed && size == 8) return ops::DType::kI64;
      if (!is_signed && size == 1) return ops::DType::kU8;
      break;
    }
    case H5T_ENUM:
      if (size == 1 && H5Tget_nmembers(type) == 2) {
        int8_t value = 0;
        char name[8] = {};
        if (H5Tenum_nameof(type, &value, name, sizeof(name)) >= 0 &&
            std::strcmp(name, "FALSE") == 0)
          return ops::DType::kBool;
      }
      break;
    default:
      break;
  }
  throw UnimplementedError(fmt::format(
      "{} holds {} values, which no est dtype matches (float32, float64, int32, int64, uint8, "
      "bool); convert the dataset with h5py first",
      where, describe_type(type)));
}

ops::Shape dataspace_shape(hid_t space) {
  H5S_class_t kind = H5Sget_simple_extent_type(space);
  if (kind == H5S_SCALAR) return {};
  if (kind != H5S_SIMPLE)
    throw InvalidArgumentError("dataset has a null dataspace (no elements, not even a scalar)");
  int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return ops::Shape(dims.begin(), dims.end());
}

uint64_t checked_dataset_bytes(hid_t dataset, size_t element_size, uint64_t file_bytes,
                               const std::string& what) {
  Hid space = check_id<DataLossError>(H5Dget_space(dataset), what);
  uint64_t bytes = element_size;
  if (H5Sget_simple_extent_type(space.get()) == H5S_SIMPLE) {
    int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    for (hsize_t dim : dims)
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes) ||
          dim > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()))
        throw DataLossError(fmt::format(
            "{} declares dimensions [{}] whose size overflows 64 bits; the header is damaged", what,
            fmt::join(dims, ", ")));
  } else if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) {
    bytes = 0;
  }
  Hid create = check_id<DataLossError>(H5Dget_create_plist(dataset), what);
  if (H5Pget_nfilters(create.get()) == 0 && bytes > file_bytes)
    throw DataLossError(fmt::format(
        "{} declares shape {} of {}-byte elements, {} bytes, but the whole file holds only {} "
        "bytes; the header is damaged",
        what, ops::shape_str(dataspace_shape(space.get())), element_size, bytes, file_bytes));
  return bytes;
}

uint64_t file_size_of(hid_t object) {
  Hid file = check_id<DataLossError>(H5Iget_file_id(object), "finding the file of an object");
  hsize_t size = 0;
  check_status<DataLossError>(H5Fget_filesize(file.get(), &size), "reading the file size");
  return static_cast<uint64_t>(size);
}

Hid make_dataspace(const ops::Shape& shape) {
  if (shape.empty())
    return check_id<InternalError>(H5Screate(H5S_SCALAR), "creating a scalar dataspace");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return check_id<InternalError>(
      H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      "creating a dataspace of shape " + ops::shape_str(shape));
}

bool has_attribute(hid_t object, const char* name) {
  htri_t exists = H5Aexists(object, name);
  if (exists < 0)
    throw DataLossError(
        fmt::format("looking up attribute \"{}\" failed (HDF5: {})", name, hdf5_error_text()));
  return exists > 0;
}

namespace {

void write_scalar_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type,
                            const void* value) {
  if (has_attribute(object, name)) H5Adelete(object, name);
  Hid space = make_dataspace({});
  Hid attribute = check_id<UnknownError>(
      H5Acreate2(object, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      fmt::format("creating attribute \"{}\"", name));
  check_status<UnknownError>(H5Awrite(attribute.get(), memory_type, value),
                             fmt::format("writing attribute \"{}\"", name));
}

Hid open_attribute(hid_t object, const char* name, const std::string& where) {
  if (!has_attribute(object, name))
    throw DataLossError(fmt::format("{} has no attribute \"{}\"", where, name));
  return check_id<DataLossError>(H5Aopen(object, name, H5P_DEFAULT),
                                 fmt::format("{}: opening attribute \"{}\"", where, name));
}

template <class T>
T read_number_attribute(hid_t object, const char* name, const std::string& where,
                        hid_t memory_type) {
  Hid attribute = open_attribute(object, name, where);
  Hid type = check_id<DataLossError>(H5Aget_type(attribute.get()), where);
  H5T_class_t kind = H5Tget_class(type.get());
  Hid space = check_id<DataLossError>(H5Aget_space(attribute.get()), where);
  if ((kind != H5T_INTEGER && kind != H5T_FLOAT) || H5Sget_simple_extent_npoints(space.get()) != 1)
    throw DataLossError(fmt::format("{}: attribute \"{}\" is not a single number ({})", where, name,
                                    describe_type(type.get())));
  T value{};
  check_status<DataLossError>(H5Aread(attribute.get(), memory_type, &value),
                              fmt::format("{}: reading attribute \"{}\"", where, name));
  return value;
}

}  // namespace

void write_attribute_i64(hid_t object, const char* name, int64_t value) {
  write_scalar_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_attribute_u32(hid_t object, const char* name, uint32_t value) {
  write_scalar_attribute(object, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &value);
}

void write_attribute_f64(hid_t object, const char* name, double value) {
  write_scalar_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

// Fixed-length, so the text lives in the (checksummed) object header rather than in the
// global heap, which HDF5 does not checksum.
void write_attribute_string(hid_t object, const char* name, const std::string& value) {
  Hid type = copy_type(H5T_C_S1);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  write_scalar_attribute(object, name, type.get(), type.get(), padded.data());
}

int64_t read_attribute_i64(hid_t object, const char* name, const std::string& where) {
  return read_number_attribute<int64_t>(object, name, where, H5T_NATIVE_INT64);
}

double read_attribute_f64(hid_t object, const char* name, const std::string& where) {
  return read_number_attribute<double>(object, name, where, H5T_NATIVE_DOUBLE);
}

std::vector<std::string> read_attribute_strings(hid_t object, const char* name,
                                                const std::string& where) {
  Hid attribute = open_attribute(object, name, where);
  Hid type = check_id<DataLossError>(H5Aget_type(attribute.get()), where);
  Hid space = check_id<DataLossError>(H5Aget_space(attribute.get()), where);
  const auto count = static_cast<size_t>(H5Sget_simple_extent_npoints(space.get()));
  std::vector<std::string> strings;
  if (count == 0) return strings;  // an empty list, whatever its element type
  // Every element takes at least a byte of the attribute's stored data: a count beyond that
  // is a damaged header, not a list to allocate.
  const hsize_t stored = H5Aget_storage_size(attribute.get());
  if (H5Sget_simple_extent_npoints(space.get()) < 0 || count > stored)
    throw DataLossError(fmt::format(
        "{}: attribute \"{}\" declares {} strings in {} stored bytes; the header is damaged", where,
        name, H5Sget_simple_extent_npoints(space.get()), stored));
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw InvalidArgumentError(fmt::format("{}: attribute \"{}\" holds {} values, not strings",
                                           where, name, describe_type(type.get())));
  const std::string what = fmt::format("{}: reading attribute \"{}\"", where, name);
  if (H5Tis_variable_str(type.get()) > 0) {
    Hid memory = copy_type(H5T_C_S1);
    H5Tset_size(memory.get(), H5T_VARIABLE);
    H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
    std::vector<char*> pointers(count, nullptr);
    check_status<DataLossError>(H5Aread(attribute.get(), memory.get(), pointers.data()), what);
    for (char* text : pointers) strings.emplace_back(text ? text : "");
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(memory.get(), space.get(), H5P_DEFAULT, pointers.data());
#else
    H5Dvlen_reclaim(memory.get(), space.get(), H5P_DEFAULT, pointers.data());
#endif
  } else {
    const size_t width = H5Tget_size(type.get());
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(count), width, &bytes) || bytes > stored)
      throw DataLossError(fmt::format(
          "{}: attribute \"{}\" declares {} strings of {} bytes in {} stored bytes; the header "
          "is damaged",
          where, name, count, width, stored));
    std::vector<char> buffer(bytes);
    check_status<DataLossError>(H5Aread(attribute.get(), type.get(), buffer.data()), what);
    for (size_t i = 0; i < count; ++i) {
      std::string text(buffer.data() + i * width, width);
      text.erase(std::find(text.begin(), text.end(), '\0'), text.end());
      strings.push_back(std::move(text));
    }
  }
  return strings;
}

std::string read_attribute_string(hid_t object, const char* name, const std::string& where) {
  std::vector<std::string> strings = read_attribute_strings(object, name, where);
  if (strings.size() != 1)
    throw DataLossError(fmt::format("{}: attribute \"{}\" holds {} strings, expected one", where,
                                    name, strings.size()));
  return strings[0];
}

bool link_exists(hid_t location, const std::string& path) {
  size_t position = path.starts_with('/') ? 1 : 0;
  while (position <= path.size()) {
    size_t end = path.find('/', position);
    if (end == std::string::npos) end = path.size();
    // H5Lexists fails (negative) when an inner component is a dataset, not a group.
    if (H5Lexists(location, path.substr(0, end).c_str(), H5P_DEFAULT) <= 0) return false;
    position = end + 1;
  }
  return true;
}

bool dataset_exists(hid_t location, const std::string& path) {
  if (!link_exists(location, path)) return false;
  Hid object(H5Oopen(location, path.c_str(), H5P_DEFAULT));
  return object.valid() && H5Iget_type(object.get()) == H5I_DATASET;
}

namespace {

struct ListState {
  hid_t group;
  std::vector<std::string>* names;
};

herr_t visit_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_HARD) return 0;
  Hid object(H5Oopen(group, name, H5P_DEFAULT));
  if (!object.valid()) return -1;
  if (H5Iget_type(object.get()) == H5I_DATASET)
    static_cast<ListState*>(data)->names->emplace_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> list_datasets(hid_t group) {
  std::vector<std::string> names;
  ListState state{group, &names};
  check_status<DataLossError>(H5Lvisit(group, H5_INDEX_NAME, H5_ITER_INC, visit_link, &state),
                              "listing datasets");
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace est::checkpoint::detail
