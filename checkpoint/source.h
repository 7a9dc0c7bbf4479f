// A checkpoint to start from, in either format: est's own HDF5 checkpoints (reader.h) or
// TensorFlow's V2 checkpoints (tf_bundle_reader.h: a prefix, its `.index`, a directory whose
// `checkpoint` state file names one, or a SavedModel directory). Warm start and
// initializer_from_checkpoint read the tensors they need through it, as TF's
// checkpoint_utils.load_checkpoint does for warm_starting_util.py and init_from_checkpoint,
// and a Scaffold.init_fn may too. Names are the checkpoint's own; est's optimizer slots already
// carry TF1's names (`<var>/Adagrad`, `<var>/Ftrl` and `<var>/Ftrl_1`, `<var>/Adam` and
// `<var>/Adam_1`, `beta1_power`, ...: nn/optimizer.h), so a TF1 job's slots map as they are.
// A TF2 object-based checkpoint is also read by its variables' names (`dense/kernel`,
// `dense/kernel/Adam` for Adam's m: tf_object_graph.h), which names() lists in place of its
// keys (`layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE`, still accepted by contains()
// and read()).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::checkpoint {

class CheckpointSource {
 public:
  virtual ~CheckpointSource() = default;
  // The file (est) or prefix (TensorFlow) read, for messages.
  virtual const std::string& path() const = 0;
  // Every tensor's name, variables and slots (a TF2 checkpoint's by their variables' names).
  virtual std::vector<std::string> names() const = 0;
  virtual bool contains(std::string_view name) const = 0;
  // The whole tensor, checksums verified; NotFoundError naming it and the path when absent.
  virtual ops::Tensor read(std::string_view name) const = 0;
};

// TensorFlow's checkpoint when is_tf_checkpoint(path_or_dir), otherwise est's (a file, or a
// directory's latest checkpoint). Errors as the readers raise them: NotFoundError for a path
// with neither, DataLossError for a damaged file.
std::unique_ptr<CheckpointSource> open_checkpoint(const std::string& path_or_dir);

}  // namespace est::checkpoint
