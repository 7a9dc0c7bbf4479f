// Warm start, like tf.estimator.WarmStartSettings: initialise some variables of a new model
// from another model's checkpoint, when the new model has no checkpoint of its own.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

struct WarmStartSettings {
  std::string ckpt_to_initialize_from;  // a checkpoint file, or a directory (its latest)
  // Which variables of the new model to warm-start: a regular expression matched at the start
  // of the name (as TensorFlow's re.match), over trainable variables only. ".*": all of them.
  std::string vars_to_warm_start = ".*";
  // New name -> name in the old checkpoint, for variables that were renamed. Every key must
  // name a variable that is warm-started (InvalidArgumentError otherwise, as in TensorFlow).
  std::map<std::string, std::string> var_name_to_prev_var_name;
};

struct WarmStartResult {
  std::string path;                       // the checkpoint read
  std::vector<std::string> warm_started;  // names in the new model
};

// Applies `settings` to `into` unless `model_dir` already has a checkpoint (then nullopt:
// restoring that checkpoint takes precedence). A selected variable missing from the old
// checkpoint raises NotFoundError naming both names; shape or dtype mismatches raise
// InvalidArgumentError naming the variable and both shapes. Nothing is assigned unless every
// selected variable fits.
std::optional<WarmStartResult> warm_start(const std::string& model_dir,
                                          const WarmStartSettings& settings, TensorBundle& into);

}  // namespace est::checkpoint
