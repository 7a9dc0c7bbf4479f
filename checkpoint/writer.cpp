// The HDF5 writer: one dataset per tensor and blob, attributes for checksums and metadata,
// written under a temporary name and renamed into place.
#include "checkpoint/writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>

#include "checkpoint/checksum.h"
#include "checkpoint/file_util.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/layout.h"

#ifndef EST_VERSION
#define EST_VERSION "unknown"
#endif

namespace est::checkpoint {
namespace {

using detail::check_id;
using detail::check_status;
using detail::Hid;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string iso_time(double timestamp) {
  auto seconds = static_cast<std::time_t>(timestamp);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

class FileWriter {
 public:
  // `entries` and `data_bytes`: how many datasets the file will hold and their bytes, to size
  // the block their headers share.
  FileWriter(const std::filesystem::path& temporary, const std::string& final_path, size_t entries,
             size_t data_bytes)
      : final_path_(final_path) {
    // The 1.8 object format checksums every piece of metadata, so HDF5 itself reports
    // corruption of headers; the same format keeps the file readable by older h5py.
    Hid access = detail::file_access_list(/*for_writing=*/true);
    // Every dataset's header (and the groups' indexes) goes into one block at the start of the
    // file instead of HDF5's default 2 KB blocks between the tensors' data: opening a file that
    // is not cached then reads its metadata from one place, not from a spot before every
    // tensor. The block takes about 1 KB a dataset and what it does not use stays in the file
    // unused, so only files whose data is 64 times the block or more get it.
    const size_t metadata_block = std::min<size_t>(1024 * (entries + 16), 4 << 20);
    if (data_bytes >= 64 * metadata_block)
      check_status<InternalError>(H5Pset_meta_block_size(access.get(), metadata_block),
                                  "metadata block size");
    file_ = check_id<UnknownError>(
        H5Fcreate(temporary.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, access.get()),
        fmt::format("Creating checkpoint file {} for {} failed; check that the directory is "
                    "writable",
                    temporary.string(), final_path_));
    link_ = check_id<InternalError>(H5Pcreate(H5P_LINK_CREATE), "link create list");
    check_status<InternalError>(H5Pset_create_intermediate_group(link_.get(), 1),
                                "intermediate groups");
  }

  hid_t file() const { return file_.get(); }

  void make_group(const char* path) {
    check_id<UnknownError>(H5Gcreate2(file_.get(), path, link_.get(), H5P_DEFAULT, H5P_DEFAULT),
                           where(path));
  }

  // Writes `bytes` bytes at `data` as a dataset of `type` and `shape`, with its CRC-32 and, for
  // a variable, whether it is trainable.
  Hid write_dataset(const std::string& path, hid_t type, const ops::Shape& shape, const void* data,
                    size_t bytes, std::optional<bool> trainable = std::nullopt) {
    Hid space = detail::make_dataspace(shape);
    Hid dataset = check_id<UnknownError>(H5Dcreate2(file_.get(), path.c_str(), type, space.get(),
                                                    link_.get(), H5P_DEFAULT, H5P_DEFAULT),
                                         where(path));
    // The checksum first: attributes added after the data would grow the header into a
    // continuation block placed after that data.
    detail::write_attribute_u32(dataset.get(), layout::kChecksumAttribute, crc32(data, bytes));
    if (trainable)
      detail::write_attribute_i64(dataset.get(), layout::kTrainableAttribute, *trainable ? 1 : 0);
    if (bytes > 0)
      check_status<UnknownError>(H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                                 where(path));
    return dataset;
  }

  void close() {
    check_status<UnknownError>(H5Fclose(file_.release()),
                               fmt::format("Closing checkpoint {} failed (data not flushed); "
                                           "check free disk space",
                                           final_path_));
  }

 private:
  std::string where(const std::string& path) const {
    return fmt::format("Writing {} into checkpoint {} failed; check free disk space", path,
                       final_path_);
  }

  std::string final_path_;
  Hid file_;
  Hid link_;
};

// A bfloat16 tensor is refused, naming it: under mixed_bfloat16 the variables (the master
// weights) stay float32 (nn/mixed_precision.h), so a checkpoint holds float32 as Keras's does;
// HDF5 has no bfloat16 type that h5py or TensorFlow's readers would understand. String and
// sparse tensors are refused too (no variable is one).
void check_storable(const TensorBundle& bundle) {
  for (const TensorEntry& entry : bundle.tensors)
    if (entry.value.dtype() == ops::DType::kBF16)
      throw InvalidArgumentError(fmt::format(
          "checkpoint: {} \"{}\" is bfloat16, which checkpoints do not store; keep variables "
          "in float32 (mixed_bfloat16 does: its variables are float32 and only computation is "
          "bfloat16) or cast it to float32 first",
          entry.kind == EntryKind::kVariable ? "variable" : "slot", entry.name));
    else if (entry.value.dtype() == ops::DType::kString || entry.value.is_sparse())
      throw InvalidArgumentError(fmt::format(
          "checkpoint: {} \"{}\" is a {} tensor, which checkpoints do not store; variables and "
          "slots are dense numeric tensors",
          entry.kind == EntryKind::kVariable ? "variable" : "slot", entry.name,
          entry.value.is_sparse() ? "sparse" : "string"));
}

void write_bundle(FileWriter& writer, const TensorBundle& bundle, double timestamp) {
  hid_t root = writer.file();
  detail::write_attribute_i64(root, layout::kFormatVersionAttribute, layout::kFormatVersion);
  detail::write_attribute_string(root, layout::kFrameworkAttribute, layout::kFrameworkName);
  detail::write_attribute_string(root, layout::kFrameworkVersionAttribute, EST_VERSION);
  detail::write_attribute_string(root, layout::kCreationTimeAttribute, iso_time(timestamp));
  detail::write_attribute_f64(root, layout::kCreationTimestampAttribute, timestamp);
  detail::write_attribute_i64(root, layout::kGlobalStepAttribute, bundle.global_step);
  writer.make_group(layout::kVariablesGroup);
  writer.make_group(layout::kSlotsGroup);
  writer.make_group(layout::kStateGroup);

  for (const TensorEntry& entry : bundle.tensors) {
    const bool is_variable = entry.kind == EntryKind::kVariable;
    std::string path = fmt::format(
        "{}/{}", is_variable ? layout::kVariablesGroup : layout::kSlotsGroup, entry.name);
    Hid type = detail::file_type(entry.value.dtype());
    const Tensor host = entry.value.to(Device::cpu());  // a GPU variable's value, read back
    writer.write_dataset(path, type.get(), host.shape(), host.raw_data(), host.nbytes(),
                         is_variable ? std::optional<bool>(entry.trainable) : std::nullopt);
  }
  for (const Blob& blob : bundle.blobs) {
    std::string path = fmt::format("{}/{}", layout::kStateGroup, blob.name);
    writer.write_dataset(path, H5T_STD_U8LE, {static_cast<int64_t>(blob.bytes.size())},
                         blob.bytes.data(), blob.bytes.size());
  }
}

}  // namespace

std::string checkpoint_file_name(const std::string& checkpoint_name, int64_t global_step) {
  return fmt::format("{}-{}.h5", checkpoint_name, global_step);
}

void save(const std::string& path, const TensorBundle& bundle, const SaveOptions& options) {
  validate_bundle(bundle, fmt::format("Saving checkpoint {}", path));
  check_storable(bundle);
  std::filesystem::path final_path(path);
  ensure_directory(final_path.parent_path());
  std::filesystem::path temporary = temporary_path_for(final_path);
  detail::Hdf5Quiet quiet;
  try {
    {
      FileWriter writer(temporary, path, bundle.tensors.size() + bundle.blobs.size(),
                        bundle.tensor_bytes());
      write_bundle(writer, bundle, options.timestamp > 0 ? options.timestamp : now_seconds());
      writer.close();
    }
    fsync_file(temporary);
    rename_durably(temporary, final_path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

}  // namespace est::checkpoint
