// Small RAII and conversion helpers over HDF5's C API, shared by the writer, the reader and
// the Keras importer. Internal to checkpoint/.
//
// Every identifier is owned by an Hid that closes it; HDF5's automatic error printing is
// silenced while checkpoint code runs (Hdf5Quiet) and its error stack is folded into the
// exception message instead. Debian's libhdf5 is built thread-safe, so the background writer
// and a data pipeline reading HDF5 may call it concurrently.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/error.h"
#include "ops/tensor.h"

namespace est::checkpoint::detail {

class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& other) noexcept : id_(other.release()) {}
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.release();
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  hid_t release() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Turns HDF5's automatic error printing off on this thread for the guard's lifetime.
class Hdf5Quiet {
 public:
  Hdf5Quiet();
  ~Hdf5Quiet();
  Hdf5Quiet(const Hdf5Quiet&) = delete;
  Hdf5Quiet& operator=(const Hdf5Quiet&) = delete;

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
};

// The innermost messages of this thread's HDF5 error stack ("truncated file: eof = 1024, ...").
// The first call also keeps HDF5's shutdown at exit quiet (see hdf5_util.cpp).
std::string hdf5_error_text();

// Throws `ErrorType(message + ": " + hdf5_error_text())` when id < 0; returns the id owned.
template <class ErrorType>
Hid check_id(hid_t id, const std::string& message) {
  if (id < 0) throw ErrorType(message + " (HDF5: " + hdf5_error_text() + ")");
  return Hid(id);
}
template <class ErrorType>
void check_status(herr_t status, const std::string& message) {
  if (status < 0) throw ErrorType(message + " (HDF5: " + hdf5_error_text() + ")");
}

// A file access property list for checkpoint files. HDF5's own file locking is turned off
// where the library allows it: files are written under unique temporary names and renamed
// into place, so the lock protects nothing, while file systems without flock (some network
// file systems) would make every open fail. For writing, the 1.8 object format is selected:
// it checksums all metadata.
Hid file_access_list(bool for_writing);

// The HDF5 type a dtype is stored as (little-endian; bool as the enum h5py uses for numpy
// bools, FALSE = 0, TRUE = 1).
Hid file_type(ops::DType dtype);
// The in-memory type for reading into a Tensor of `dtype`.
Hid memory_type(ops::DType dtype);
// The dtype a dataset's HDF5 type holds; UnimplementedError naming `where` when none does.
ops::DType dtype_of_type(hid_t type, const std::string& where);
// A short description of an HDF5 type for messages ("64-bit string", "16-bit float").
std::string describe_type(hid_t type);

ops::Shape dataspace_shape(hid_t space);
Hid make_dataspace(const ops::Shape& shape);

// The bytes `dataset` declares (its dataspace's elements times `element_size`), checked
// before anything of that size is allocated: DataLossError naming `what` when the product
// overflows, or when the dataset is stored without filters (as checkpoints are) and declares
// more than the `file_bytes` its file holds. A damaged or crafted header then reads as a
// damaged file instead of an allocation of terabytes.
uint64_t checked_dataset_bytes(hid_t dataset, size_t element_size, uint64_t file_bytes,
                               const std::string& what);
// The size of the file `object` lives in, in bytes.
uint64_t file_size_of(hid_t object);

// Runs `allocate` (which makes the buffer a read fills) and turns its failure to allocate
// (std::bad_alloc, std::length_error, ResourceExhaustedError) into DataLossError naming
// `what`: a size read from a file that cannot be met is reported as the file's fault.
template <class Fn>
auto allocate_for_read(uint64_t bytes, const std::string& what, Fn&& allocate) {
  std::string failure;
  try {
    return allocate();
  } catch (const std::bad_alloc&) {
    failure = "out of memory";
  } catch (const std::length_error& error) {
    failure = error.what();
  } catch (const ResourceExhaustedError& error) {
    failure = error.what();
  }
  throw DataLossError(what + ": cannot allocate the " + std::to_string(bytes) +
                      " bytes the file declares (" + failure + ")");
}

// Attributes: scalar numbers and strings, written on any object (file, group, dataset).
// DataLossError when HDF5 cannot tell (damaged object header).
bool has_attribute(hid_t object, const char* name);
void write_attribute_i64(hid_t object, const char* name, int64_t value);
void write_attribute_u32(hid_t object, const char* name, uint32_t value);
void write_attribute_f64(hid_t object, const char* name, double value);
void write_attribute_string(hid_t object, const char* name, const std::string& value);
// Readers throw DataLossError naming `where` when the attribute is missing or of another kind.
int64_t read_attribute_i64(hid_t object, const char* name, const std::string& where);
double read_attribute_f64(hid_t object, const char* name, const std::string& where);
std::string read_attribute_string(hid_t object, const char* name, const std::string& where);
// A string or an array of strings, fixed-length (as h5py writes numpy bytes arrays) or
// variable-length.
std::vector<std::string> read_attribute_strings(hid_t object, const char* name,
                                                const std::string& where);

// True when every component of `path` ("/variables/dense/kernel") exists.
bool link_exists(hid_t location, const std::string& path);
// True when `path` exists and is a dataset (not a group).
bool dataset_exists(hid_t location, const std::string& path);

// Every dataset below `group`, by path relative to it ("dense/kernel"), sorted by name.
std::vector<std::string> list_datasets(hid_t group);

}  // namespace est::checkpoint::detail
