// VerifiedCheckpoint: an est checkpoint file opened for a restore in place, in two passes.
//
// Opening it reads the metadata and checks every tensor's and blob's CRC-32, reading the data
// in file order through one 8 MB buffer (the file is then in the page cache); a damaged file
// fails here, before anything of the model is touched. read_into() then reads a tensor's bytes
// straight into the model's own tensor: one copy from the page cache, no staging tensor of the
// model's size, so a restore runs near the file's read speed and needs 8 MB of extra memory
// instead of the checkpoint's size (issue 32, item 5). Datasets HDF5 stores otherwise than the
// writer does (chunked, converted) are read whole into a staging tensor during verification.
// The file must not change between the passes (checkpoints are renamed into place, never
// rewritten): check_unchanged() checks its size and modification time and raises DataLossError when
// they moved. Implemented in reader.cpp beside the reader it shares.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/reader.h"

namespace est::checkpoint {

class VerifiedCheckpoint {
 public:
  // Errors as load(): NotFoundError, DataLossError (damaged, failing a checksum), ...
  explicit VerifiedCheckpoint(const std::string& path);
  ~VerifiedCheckpoint();
  VerifiedCheckpoint(const VerifiedCheckpoint&) = delete;
  VerifiedCheckpoint& operator=(const VerifiedCheckpoint&) = delete;

  const CheckpointInfo& info() const;  // tensors in read_info()'s order
  std::vector<Blob> blobs() const;     // read and checked while opening
  // Tensor `index` of info().tensors into `target` (same shape and dtype: the caller checked).
  void read_into(size_t index, Tensor& target) const;
  // DataLossError when the file changed since it was opened (call it before and after the
  // read_into() calls).
  void check_unchanged() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace est::checkpoint
