// Writing TensorFlow's own V2 checkpoints (the tensor bundle) with no TensorFlow, so that
// tf.train.load_checkpoint / tf.train.NewCheckpointReader read what est saved. Follows
// tensorflow/core/util/tensor_bundle/tensor_bundle.cc (BundleWriter: Add, WriteTensor,
// WriteStringTensor, Finish) and naming.cc:
//
//   <prefix>.data-00000-of-00001  the tensors back to back, each as its bytes (little-endian,
//                                 row-major); a string tensor as varint64 lengths, the masked
//                                 CRC32C of the lengths, then the bytes
//   <prefix>.index                a sorted table (tf_bundle_table.h): under the empty key a
//                                 BundleHeaderProto {num_shards 1, LITTLE, producer 1}, under
//                                 each tensor's name a BundleEntryProto {dtype, shape, shard 0,
//                                 offset, size, masked CRC32C of the bytes}
//
// Both files are written under temporary names (file_util.h) and renamed into place, the data
// shard first: a crash leaves the previous bundle of that prefix, or none. Every dtype est has
// maps onto TensorFlow's (float32 DT_FLOAT ... bfloat16 DT_BFLOAT16, string DT_STRING); a
// sparse tensor or an empty or duplicate name is an InvalidArgumentError naming it; I/O errors
// name the file.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "checkpoint/bundle.h"
#include "checkpoint/tf_bundle_table.h"
#include "ops/tensor.h"

namespace est::checkpoint {

struct TfBundleWriterOptions {
  size_t index_block_size = tf_table::kDefaultBlockSize;  // TensorFlow's; tests make it small
};

// TensorFlow's DataType value for an est dtype (DT_FLOAT = 1, ...).
int tf_dtype_of(ops::DType dtype);

class TfBundleWriter {
 public:
  // Opens `<prefix>.data-00000-of-00001`'s temporary file (creating the directory).
  explicit TfBundleWriter(std::string prefix, TfBundleWriterOptions options = {});
  // Without a successful finish(), removes the temporary files and leaves no bundle.
  ~TfBundleWriter();
  TfBundleWriter(const TfBundleWriter&) = delete;
  TfBundleWriter& operator=(const TfBundleWriter&) = delete;

  // Appends a dense tensor (a GPU tensor is read back) under `name`, as BundleWriter::Add.
  void add(const std::string& name, const ops::Tensor& value);
  // Writes the index and moves both files into place (fsynced).
  void finish();

  const std::string& prefix() const { return prefix_; }

 private:
  struct File;
  std::string prefix_;
  TfBundleWriterOptions options_;
  std::unique_ptr<File> data_;
  int64_t size_ = 0;
  std::map<std::string, std::string> entries_;  // name -> serialized BundleEntryProto
  bool finished_ = false;
};

// The tensors of `bundle` (variables and slots under their names; global_step as the int64
// scalar TensorFlow keeps) as a TensorFlow checkpoint at `prefix`. Blobs (input position, RNG
// state) have no place in TensorFlow's format and are left out. Returns how many tensors it
// wrote (a global_step is added when the bundle has none).
size_t write_tf_checkpoint(const std::string& prefix, const TensorBundle& bundle,
                           const TfBundleWriterOptions& options = {});

// The files of the bundle at `prefix` that exist (index and data shards).
std::vector<std::string> tf_checkpoint_files(const std::string& prefix);

}  // namespace est::checkpoint
