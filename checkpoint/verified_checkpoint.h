// VerifiedCheckpoint: an est checkpoint file opened for a restore in place.
//
// Opening it reads the metadata and the blobs, and reads whole any dataset HDF5 stores otherwise
// than the writer does (chunked, converted) into a staging tensor, each checked against its
// CRC-32. read_into() then reads a tensor's bytes straight from the file into the model's own
// tensor, in 8 MB pieces each checksummed while still in the cache, with the kernel asked to read
// ahead of the pieces: one pass over the file at about its read speed, and no staging copy of the
// model's size (issue 32, item 5). A tensor that fails its checksum raises DataLossError after
// its bytes were written into a CPU target (a target on another device is written only after the
// check). verify_all() checks every checksum first, through one 8 MB buffer, for a restore that
// must not write anything from a damaged file (RestoreOptions::verify_first); read_into() then
// copies from the page cache. The file must not change during the restore (checkpoints are
// renamed into place, never rewritten): check_unchanged() checks its size and modification time
// and raises DataLossError when they moved. Implemented (verified_checkpoint.cpp) over the
// reader's CheckpointFile (checkpoint_file.h).
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
  // The indices of info().tensors in the order their bytes lie in the file: reading them so is
  // one sequential pass.
  const std::vector<size_t>& file_order() const;
  // Checks the CRC-32 of every tensor not yet checked (DataLossError naming the first that
  // fails), reading the file once through one 8 MB buffer.
  void verify_all() const;
  // Tensor `index` of info().tensors into `target` (same shape and dtype: the caller checked),
  // its CRC-32 checked unless verify_all() did: DataLossError naming it when it fails.
  void read_into(size_t index, Tensor& target) const;
  // DataLossError when the file changed since it was opened (call it before and after the
  // read_into() calls).
  void check_unchanged() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace est::checkpoint
