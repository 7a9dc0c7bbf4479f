// The HDF5 checkpoint file as est's readers see it: reader.cpp's public API (load, read_info,
// load_variable) and verified_checkpoint.cpp's restore in place. Internal to checkpoint/.
// Opening classifies failures: absent file -> NotFoundError; not HDF5, truncated or with damaged
// metadata -> DataLossError; HDF5 but not a checkpoint -> InvalidArgumentError; newer format ->
// UnimplementedError.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checksum.h"
#include "checkpoint/file_util.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/layout.h"
#include "checkpoint/reader.h"

namespace est::checkpoint::detail {

inline constexpr std::string_view kRestoreHint =
    "the file is damaged; restore an earlier checkpoint (restore_into on the directory falls "
    "back to one) or delete this file";

class CheckpointFile {
 public:
  explicit CheckpointFile(const std::string& path) : path_(path) {
    std::error_code error;
    if (!std::filesystem::exists(path_, error))
      throw NotFoundError(fmt::format(
          "Checkpoint {} does not exist; check the path, or pass the model directory to use "
          "its latest checkpoint",
          path_));
    htri_t is_hdf5 = H5Fis_hdf5(path_.c_str());
    if (is_hdf5 <= 0)
      throw DataLossError(
          fmt::format("Checkpoint {} is not an HDF5 file (no HDF5 signature: empty, truncated or "
                      "overwritten); {}",
                      path_, kRestoreHint));
    file_ = check_id<DataLossError>(
        H5Fopen(path_.c_str(), H5F_ACC_RDONLY, detail::file_access_list(false).get()),
        fmt::format("Checkpoint {} cannot be opened; {}", path_, kRestoreHint));
    if (!detail::has_attribute(file_.get(), layout::kFormatVersionAttribute))
      throw InvalidArgumentError(fmt::format(
          "{} is an HDF5 file but not an est checkpoint (no \"{}\" attribute); for Keras "
          "weights use import_keras_h5()",
          path_, layout::kFormatVersionAttribute));
    file_bytes_ = detail::file_size_of(file_.get());
    format_version_ =
        detail::read_attribute_i64(file_.get(), layout::kFormatVersionAttribute, where());
    if (format_version_ > layout::kFormatVersion || format_version_ < 1)
      throw UnimplementedError(fmt::format(
          "Checkpoint {} has format version {}; this build reads versions 1 to {}: upgrade est",
          path_, format_version_, layout::kFormatVersion));
    // Tensor data is read past HDF5 where it can be (raw_offset): large sequential reads.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ >= 0) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~CheckpointFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  const std::string& path() const { return path_; }
  hid_t file() const { return file_.get(); }
  int64_t format_version() const { return format_version_; }
  std::string where() const { return fmt::format("Checkpoint {}", path_); }

  bool has_group(const char* group) const { return detail::link_exists(file_.get(), group); }

  std::vector<std::string> datasets(const char* group) const {
    if (!has_group(group)) return {};
    Hid handle =
        check_id<DataLossError>(H5Gopen2(file_.get(), group, H5P_DEFAULT),
                                fmt::format("{}: opening {}; {}", where(), group, kRestoreHint));
    try {
      return detail::list_datasets(handle.get());
    } catch (const DataLossError& error) {
      throw DataLossError(
          fmt::format("{}: {} in {}; {}", where(), error.what(), group, kRestoreHint));
    }
  }

  Hid open_dataset(const std::string& path) const {
    return check_id<DataLossError>(H5Dopen2(file_.get(), path.c_str(), H5P_DEFAULT),
                                   fmt::format("{}: opening {}; {}", where(), path, kRestoreHint));
  }

  // Shape, dtype and stored checksum of a dataset.
  TensorInfo describe(const std::string& name, EntryKind kind, const char* group) const {
    std::string path = fmt::format("{}/{}", group, name);
    Hid dataset = open_dataset(path);
    Hid type = check_id<DataLossError>(H5Dget_type(dataset.get()), where());
    Hid space = check_id<DataLossError>(H5Dget_space(dataset.get()), where());
    TensorInfo info;
    info.name = name;
    info.kind = kind;
    info.shape = detail::dataspace_shape(space.get());
    info.dtype = detail::dtype_of_type(type.get(), fmt::format("{}: {}", where(), path));
    check_size(dataset.get(), ops::dtype_size(info.dtype),
               fmt::format("{} \"{}\"", kind_label(kind), name));
    info.crc32 = static_cast<uint32_t>(detail::read_attribute_i64(
        dataset.get(), layout::kChecksumAttribute, where() + " " + path));
    if (kind == EntryKind::kVariable &&
        detail::has_attribute(dataset.get(), layout::kTrainableAttribute))
      info.trainable =
          detail::read_attribute_i64(dataset.get(), layout::kTrainableAttribute, where()) != 0;
    return info;
  }

  // Reads a dataset into `out` (numel * dtype bytes) and checks its CRC. Stored as checkpoints
  // store it (raw_offset), its bytes are read straight from the file into `out` in large
  // pieces, each checksummed while still in the cache; anything else goes through H5Dread.
  void read_into(const std::string& path, const std::string& label, ops::DType dtype,
                 uint32_t stored_crc, void* out, size_t bytes) const {
    Hid dataset = open_dataset(path);
    if (bytes > 0) {
      if (std::optional<uint64_t> offset = raw_offset(dataset.get(), dtype, bytes)) {
        read_raw_checked(label, *offset, bytes, static_cast<char*>(out), stored_crc);
        return;
      }
      Hid memory = detail::memory_type(dtype);
      check_status<DataLossError>(
          H5Dread(dataset.get(), memory.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
          fmt::format("{}: reading {}; {}", where(), label, kRestoreHint));
    }
    check_crc(label, stored_crc, bytes > 0 ? crc32(out, bytes) : 0);
  }

  // Where a tensor's bytes start in the file, for reading them in file order; the end of
  // the address space when HDF5 cannot say (they are then read last).
  uint64_t data_position(const TensorInfo& info) const {
    Hid dataset = open_dataset(dataset_path(info));
    haddr_t offset = H5Dget_offset(dataset.get());
    return offset == HADDR_UNDEF ? UINT64_MAX : static_cast<uint64_t>(offset);
  }

  // Where tensor `info`'s bytes lie in the file when they can be read past HDF5 (raw_offset).
  std::optional<uint64_t> raw_location(const TensorInfo& info) const {
    Hid dataset = open_dataset(dataset_path(info));
    return raw_offset(dataset.get(), info.dtype, tensor_bytes(info));
  }

  // Checks the CRC of the tensor at raw `offset`, reading it through `buffer` in 8 MB pieces.
  void verify_raw(const TensorInfo& info, uint64_t offset, std::vector<char>& buffer) const {
    constexpr size_t kPiece = size_t{8} << 20;
    const size_t bytes = tensor_bytes(info);
    if (buffer.size() < std::min(bytes, kPiece)) buffer.resize(std::min(bytes, kPiece));
    uint32_t computed = 0;
    for (size_t done = 0; done < bytes;) {
      const size_t piece = std::min(kPiece, bytes - done);
      read_raw(label_of(info), offset + done, piece, buffer.data(),
               [&](const char* data, size_t size) { computed = crc32(data, size, computed); });
      done += piece;
    }
    check_crc(label_of(info), info.crc32, computed);
  }

  // Reads tensor `info` at raw `offset` into `out`, checking its CRC while each piece is cached.
  void read_raw_verified(const TensorInfo& info, uint64_t offset, char* out) const {
    read_raw_checked(label_of(info), offset, tensor_bytes(info), out, info.crc32);
  }

  // `bytes` at raw `offset` into `out`, their CRC computed piece by piece and checked against
  // `stored_crc`.
  void read_raw_checked(const std::string& label, uint64_t offset, size_t bytes, char* out,
                        uint32_t stored_crc) const {
    uint32_t computed = 0;
    read_raw(label, offset, bytes, out,
             [&](const char* piece, size_t size) { computed = crc32(piece, size, computed); });
    check_crc(label, stored_crc, computed);
  }

  // `bytes` at raw `offset` into `out`, each piece handed to `each_piece` (may be empty). The
  // kernel is asked to read ahead of the pieces (read_ahead), so the disk keeps streaming while a
  // piece is checksummed and copied.
  void read_raw(const std::string& label, uint64_t offset, size_t bytes, char* out,
                const std::function<void(const char*, size_t)>& each_piece) const {
    read_ahead(offset);
    uint64_t at = offset;
    const int64_t done =
        read_file_range(fd_, static_cast<int64_t>(offset), static_cast<int64_t>(bytes), out,
                        [&](const char* piece, size_t size) {
                          at += size;
                          read_ahead(at);
                          if (each_piece) each_piece(piece, size);
                        });
    if (done != static_cast<int64_t>(bytes))
      throw DataLossError(fmt::format("{}: reading {} ({} bytes at offset {}) came up short; {}",
                                      where(), label, bytes, offset, kRestoreHint));
  }

  // Asks the kernel (POSIX_FADV_WILLNEED) to read the kReadAhead bytes from `offset` into the
  // page cache in the background; each range is asked for once. The plain read(2)'s own readahead
  // stops while the reader checksums and copies; this one does not.
  void read_ahead(uint64_t offset) const {
    constexpr uint64_t kReadAhead = uint64_t{64} << 20;
    const uint64_t until = std::min<uint64_t>(offset + kReadAhead, file_bytes_);
    if (fd_ < 0 || until <= advised_until_) return;
    const uint64_t from = std::max(offset, advised_until_);
    ::posix_fadvise(fd_, static_cast<off_t>(from), static_cast<off_t>(until - from),
                    POSIX_FADV_WILLNEED);
    advised_until_ = until;
  }

  // The file's size and modification time, which a restore checks did not move.
  std::pair<int64_t, int64_t> stamp() const {
    struct stat info {};
    if (fd_ < 0 || ::fstat(fd_, &info) != 0) return {-1, -1};
    return {static_cast<int64_t>(info.st_size),
            static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
  }

  Tensor read_tensor(const TensorInfo& info) const {
    std::string path = dataset_path(info);
    std::string label = label_of(info);
    Tensor tensor = detail::allocate_for_read(
        static_cast<uint64_t>(ops::num_elements(info.shape)) * ops::dtype_size(info.dtype),
        fmt::format("{}: {}; {}", where(), label, kRestoreHint),
        [&] { return Tensor::empty(info.shape, info.dtype); });
    read_into(path, label, info.dtype, info.crc32, tensor.raw_data(), tensor.nbytes());
    return tensor;
  }

  BlobInfo describe_blob(const std::string& name) const {
    std::string path = fmt::format("{}/{}", layout::kStateGroup, name);
    Hid dataset = open_dataset(path);
    Hid type = check_id<DataLossError>(H5Dget_type(dataset.get()), where());
    Hid space = check_id<DataLossError>(H5Dget_space(dataset.get()), where());
    check_size(dataset.get(), std::max<size_t>(H5Tget_size(type.get()), 1),
               fmt::format("blob \"{}\"", name));
    BlobInfo info;
    info.name = name;
    info.bytes = static_cast<size_t>(H5Sget_simple_extent_npoints(space.get()));
    info.crc32 = static_cast<uint32_t>(detail::read_attribute_i64(
        dataset.get(), layout::kChecksumAttribute, where() + " " + path));
    return info;
  }

  std::string read_blob(const BlobInfo& info) const {
    std::string bytes = detail::allocate_for_read(
        info.bytes, fmt::format("{}: blob \"{}\"; {}", where(), info.name, kRestoreHint),
        [&] { return std::string(info.bytes, '\0'); });
    read_into(fmt::format("{}/{}", layout::kStateGroup, info.name),
              fmt::format("blob \"{}\"", info.name), ops::DType::kU8, info.crc32, bytes.data(),
              bytes.size());
    return bytes;
  }

  CheckpointInfo info() const {
    CheckpointInfo info;
    info.path = path_;
    info.format_version = format_version_;
    info.global_step =
        detail::read_attribute_i64(file_.get(), layout::kGlobalStepAttribute, where());
    info.framework_version =
        detail::read_attribute_string(file_.get(), layout::kFrameworkVersionAttribute, where());
    info.creation_time =
        detail::read_attribute_string(file_.get(), layout::kCreationTimeAttribute, where());
    info.creation_timestamp =
        detail::read_attribute_f64(file_.get(), layout::kCreationTimestampAttribute, where());
    for (const std::string& name : datasets(layout::kVariablesGroup))
      info.tensors.push_back(describe(name, EntryKind::kVariable, layout::kVariablesGroup));
    for (const std::string& name : datasets(layout::kSlotsGroup))
      info.tensors.push_back(describe(name, EntryKind::kSlot, layout::kSlotsGroup));
    for (const std::string& name : datasets(layout::kStateGroup))
      info.blobs.push_back(describe_blob(name));
    return info;
  }

 private:
  static size_t tensor_bytes(const TensorInfo& info) {
    return static_cast<size_t>(ops::num_elements(info.shape)) * ops::dtype_size(info.dtype);
  }
  static std::string label_of(const TensorInfo& info) {
    return fmt::format("{} \"{}\"", kind_label(info.kind), info.name);
  }
  void check_crc(const std::string& label, uint32_t stored, uint32_t computed) const {
    if (computed != stored)
      throw DataLossError(
          fmt::format("{}: {} fails its checksum (stored crc32 {:08x}, computed {:08x}); {}",
                      where(), label, stored, computed, kRestoreHint));
  }

  static std::string dataset_path(const TensorInfo& info) {
    return fmt::format(
        "{}/{}", info.kind == EntryKind::kVariable ? layout::kVariablesGroup : layout::kSlotsGroup,
        info.name);
  }

  // The file offset of a dataset's bytes when they can be read without HDF5: stored
  // contiguously (as the writer stores them: no filters, no chunks), allocated, exactly `bytes`
  // long, inside the file, and in `dtype`'s memory layout already (no conversion).
  std::optional<uint64_t> raw_offset(hid_t dataset, ops::DType dtype, size_t bytes) const {
    if (fd_ < 0) return std::nullopt;
    const haddr_t offset = H5Dget_offset(dataset);
    if (offset == HADDR_UNDEF || H5Dget_storage_size(dataset) != bytes || offset > file_bytes_ ||
        bytes > file_bytes_ - offset)
      return std::nullopt;
    Hid type(H5Dget_type(dataset));
    Hid memory = detail::memory_type(dtype);
    if (!type.valid() || H5Tequal(type.get(), memory.get()) <= 0) return std::nullopt;
    return static_cast<uint64_t>(offset);
  }

  // The declared size of a dataset against the file's (hdf5_util.h), before any allocation.
  void check_size(hid_t dataset, size_t element_size, const std::string& label) const {
    try {
      detail::checked_dataset_bytes(dataset, element_size, file_bytes_,
                                    fmt::format("{}: {}", where(), label));
    } catch (const DataLossError& error) {
      throw DataLossError(fmt::format("{}; {}", error.what(), kRestoreHint));
    }
  }

  static const char* kind_label(EntryKind kind) {
    return kind == EntryKind::kVariable ? "variable" : "slot";
  }

  std::string path_;
  Hid file_;
  uint64_t file_bytes_ = 0;  // what any dataset's declared size is checked against
  int64_t format_version_ = 0;
  int fd_ = -1;                         // the same file, for raw_offset's reads
  mutable uint64_t advised_until_ = 0;  // read_ahead has asked for the file up to here
};

// The indices of `tensors` in the order their bytes lie in the file (the writer's, not the
// listing's sorted one), so that reading them is one sequential pass the kernel's readahead
// keeps ahead of.
std::vector<size_t> file_order(const CheckpointFile& file, const std::vector<TensorInfo>& tensors);

// Runs `read` on the file at `path`; DataLossErrors raised below the file level (attribute
// helpers, listing) get the file name and the hint added.
template <class Fn>
auto with_file_context(const std::string& path, Fn&& read) {
  try {
    return read();
  } catch (const DataLossError& error) {
    std::string message = error.what();
    if (message.find(path) != std::string::npos) throw;
    throw DataLossError(fmt::format("Checkpoint {}: {}; {}", path, message, kRestoreHint));
  }
}

}  // namespace est::checkpoint::detail
