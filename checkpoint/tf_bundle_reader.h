// Reading TensorFlow's own V2 checkpoints (the tensor bundle) with no TensorFlow: a prefix's
// `<prefix>.index` (a sorted table, tf_bundle_table.h, of BundleEntryProto values under the
// tensor names, and a BundleHeaderProto under the empty key) and its data shards
// `<prefix>.data-00000-of-00002`... Follows tensorflow/core/util/tensor_bundle/tensor_bundle.cc
// (BundleReader): header and version checks, each tensor's masked CRC32C checked over the bytes
// read, string tensors (varint64 lengths, a masked CRC32C of the lengths, then the bytes), and
// partitioned variables assembled whole from their slices.
//
// The shape mirrors checkpoint/reader.h (list_variables, load_variable on a path or directory)
// so that est's HDF5 checkpoints and TensorFlow's can sit behind one interface. Errors:
// NotFoundError for a missing index, shard or tensor; DataLossError for corruption;
// UnimplementedError for what est cannot hold (a dtype it lacks, a big-endian bundle);
// InvalidArgumentError for a bundle version this reader does not accept.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::checkpoint {

namespace tfproto {
class BundleEntryProto;
}

struct TfTensorInfo {
  std::string name;        // "dense/kernel"
  int tf_dtype = 0;        // TensorFlow's DataType enum value (DT_FLOAT = 1, ...)
  std::string dtype_name;  // TensorFlow's name of it: "float32", "int8", "string"
  std::string dtype_enum;  // the enum value's name: "DT_FLOAT", "DT_INT8", "DT_STRING"
  ops::Shape shape;        // the full shape (also for a partitioned variable)
  bool partitioned = false;
};

// The prefix a path names: `<prefix>` itself (its `.index` exists), `<prefix>.index`, a
// directory whose `checkpoint` state file names one, or a SavedModel directory (its
// `variables/variables`). NotFoundError saying what was looked for otherwise.
std::string resolve_tf_checkpoint_prefix(const std::string& path_or_dir);

// Whether resolve_tf_checkpoint_prefix would find a TensorFlow checkpoint there.
bool is_tf_checkpoint(const std::string& path_or_dir);

// TensorFlow's `<prefix>.data-%05d-of-%05d` (tensor_bundle/naming.cc).
std::string tf_data_shard_path(const std::string& prefix, int shard, int num_shards);

class TfBundleReader {
 public:
  // Reads and checks the index (header, versions, endianness); data shards are opened when a
  // tensor is read.
  explicit TfBundleReader(const std::string& path_or_dir);
  ~TfBundleReader();
  TfBundleReader(const TfBundleReader&) = delete;
  TfBundleReader& operator=(const TfBundleReader&) = delete;

  const std::string& prefix() const { return prefix_; }
  int num_shards() const { return num_shards_; }

  // Like tf.train.list_variables: every tensor (slices of partitioned ones folded into their
  // full tensor), sorted by name.
  std::vector<TfTensorInfo> list_variables() const;
  bool contains(std::string_view name) const;

  // Like tf.train.load_variable: the whole tensor, checksums verified.
  ops::Tensor load_variable(std::string_view name) const;

 private:
  static ops::Shape checked_shape(const tfproto::BundleEntryProto& entry, const std::string& where);
  const tfproto::BundleEntryProto& entry(std::string_view key, std::string_view what) const;
  ops::Tensor read_stored(std::string_view name, const tfproto::BundleEntryProto& entry) const;
  ops::Tensor read_partitioned(std::string_view name, const tfproto::BundleEntryProto& entry) const;

  std::string prefix_;
  std::string index_path_;
  int num_shards_ = 0;
  std::map<std::string, std::unique_ptr<tfproto::BundleEntryProto>, std::less<>> entries_;
  // The data shards, opened when first read and kept open, so that the kernel's readahead
  // follows a load of every tensor in key order (the shards' layout) from one to the next.
  int shard_fd(int shard, std::string_view key) const;
  mutable std::mutex shard_mutex_;
  mutable std::vector<int> shard_fds_;
};

// One-call forms, as checkpoint/reader.h's.
std::vector<TfTensorInfo> tf_list_variables(const std::string& path_or_dir);
ops::Tensor tf_load_variable(const std::string& path_or_dir, std::string_view name);

}  // namespace est::checkpoint
