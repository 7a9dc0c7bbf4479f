// Reading checkpoint files: metadata, single variables, whole bundles, verification.
//
// Every function takes a checkpoint file or a model directory (whose latest checkpoint, per
// its `checkpoint` state file, is read). Data is checked against the CRC-32 stored with each
// dataset; a file that cannot be opened (truncated, overwritten) or whose data fails its
// checksum raises DataLossError naming the file, the variable and what to do. A missing file
// raises NotFoundError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

struct TensorInfo {
  std::string name;  // "dense/kernel"
  EntryKind kind = EntryKind::kVariable;
  ops::Shape shape;
  ops::DType dtype = ops::DType::kF32;
  bool trainable = false;
  uint32_t crc32 = 0;  // as stored
};

struct BlobInfo {
  std::string name;
  size_t bytes = 0;
  uint32_t crc32 = 0;
};

struct CheckpointInfo {
  std::string path;  // the file read
  int64_t global_step = 0;
  int64_t format_version = 0;
  std::string framework_version;
  std::string creation_time;  // ISO 8601, UTC
  double creation_timestamp = 0;
  std::vector<TensorInfo> tensors;  // variables, then slots; each sorted by name
  std::vector<BlobInfo> blobs;      // sorted by name
};

// The file a path names: the path itself, or for a directory the latest checkpoint in its
// state file (NotFoundError when the directory has none).
std::string resolve_checkpoint_path(const std::string& path_or_dir);

// Metadata only: no tensor data is read.
CheckpointInfo read_info(const std::string& path_or_dir);

// Everything, checksums verified. Tensors come back in the order of read_info().
TensorBundle load(const std::string& path_or_dir);

// Like tf.train.list_variables: every tensor (variables and slots) with shape and dtype.
std::vector<TensorInfo> list_variables(const std::string& path_or_dir);

// Like tf.train.load_variable: one tensor (variable or slot), checksum verified.
// NotFoundError naming the variable and the file when it is absent.
Tensor load_variable(const std::string& path_or_dir, std::string_view name);

// Reads every dataset and checks its checksum; DataLossError on the first failure.
void verify(const std::string& path_or_dir);

}  // namespace est::checkpoint
