// Restoring a checkpoint into existing tensors, in place, with fallback to older checkpoints.
//
// restore_into() assigns by name, in place (every alias of a variable sees the new value).
// Names, shapes and dtypes are checked against the metadata first: a mismatch leaves the model
// untouched. Then each tensor of an est file is read straight into the model's, in the file's
// order, its CRC-32 checked as it is read (verified_checkpoint.h): one pass over the file.
// TensorFlow checkpoints are loaded whole, then copied. Given a directory, it tries the newest
// checkpoint its state file lists and, when that one is unreadable or fails its checksums,
// logs a warning naming it and falls back to the previous one, which writes the tensors again.
// Bad files are never deleted. A checksum that fails mid-read leaves the tensors read before it
// overwritten; when no earlier checkpoint replaces them the DataLossError names them.
// RestoreOptions::verify_first checks every checksum before writing anything, for a model that
// must stay as it was after a failed restore, at the cost of a second pass over the file.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

struct RestoreOptions {
  // Tensors of the target absent from the checkpoint keep their values instead of raising
  // NotFoundError (a model that grew a layer).
  bool allow_missing = false;
  // Check every checksum of an est file before writing any tensor (two passes over the file,
  // about half the speed of one): a damaged file then leaves the model as it was.
  bool verify_first = false;
};

struct RestoreResult {
  std::string path;  // the checkpoint that was restored
  int64_t global_step = 0;
  std::vector<std::string> missing;  // target tensors the checkpoint lacks (allow_missing)
  std::vector<std::string> unused;   // checkpoint tensors the target has no place for
  std::vector<std::string> skipped;  // newer checkpoints that were unreadable, newest first
  std::vector<Blob> blobs;           // the checkpoint's blobs (iterator position, RNG state)
};

// Restores `path_or_dir` into `into`: every tensor by name (shape and dtype must match:
// InvalidArgumentError naming the variable and both shapes), the blobs (replacing those of
// `into`) and the global step. NotFoundError when a directory has no checkpoint or a tensor
// is missing (unless allowed); DataLossError when no readable checkpoint is left.
RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options = {});
// The same, also reading each checkpoint tensor `into` has no place for (result.unused, in that
// order) into a new tensor of `unused_values`: restore_store() stages them for variables
// created later (an optimizer's slots), from the same single pass.
RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options, std::vector<Tensor>* unused_values);

// The newest readable checkpoint of a directory (or the file itself), loaded and verified,
// with the fallback and warnings of restore_into(). `skipped` receives the unreadable ones.
TensorBundle load_with_fallback(const std::string& path_or_dir, std::string* loaded_path,
                                std::vector<std::string>* skipped);

// The checking and copying half of restore_into(), for adapters that load themselves.
RestoreResult assign_into(const TensorBundle& loaded, const std::string& loaded_path,
                          TensorBundle& into, const RestoreOptions& options = {});

}  // namespace est::checkpoint
