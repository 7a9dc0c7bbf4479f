// Resuming from TensorFlow's own checkpoints: a model_dir whose `checkpoint` state file names
// `model.ckpt-N` (TensorFlow's V2 prefix: `model.ckpt-N.index` and its data shards, no est
// checkpoint) is restored as est's own is, as TF's Estimator would restore it: every variable
// and optimizer slot by name (TF1's names are est's: nn/optimizers.h; a TF2 object-based
// checkpoint by its variables' names, tf_object_graph.h) and the global step from its
// `global_step` tensor. restore.cpp's load_with_fallback() and latest_checkpoint() use these,
// so training, evaluation and prediction continue from such a directory, and the next save
// writes est's checkpoint beside TensorFlow's (which CheckpointManager's retention deletes in
// its turn, as TF's Saver would).
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

// Whether `path` is a TensorFlow checkpoint prefix: no file at `path` itself, but
// `<path>.index` exists.
bool is_tf_prefix(const std::string& path);

// Every tensor of a TensorFlow checkpoint (a prefix, or anything open_checkpoint takes) as a
// bundle of variables (checksums verified), with global_step set from its `global_step` tensor
// (0 without one). The object graph of a TF2 checkpoint is not a tensor of the bundle. Errors
// as TfBundleReader raises them, naming the checkpoint.
TensorBundle load_tf_checkpoint(const std::string& path);

// The global step a TensorFlow checkpoint holds (its `global_step` tensor), 0 without one.
int64_t tf_checkpoint_global_step(const std::string& path);

}  // namespace est::checkpoint
