// Loading a whole TensorFlow checkpoint as a TensorBundle, for restore (tf_resume.h). As TF's
// Estimator restores with a Saver (tensorflow/python/training/saver.py): every tensor by name,
// the step being the `global_step` variable's value.
#include "checkpoint/tf_resume.h"

#include <fmt/format.h>

#include <filesystem>

#include "checkpoint/source.h"
#include "nn/variable_store.h"
#include "ops/error.h"

namespace est::checkpoint {
namespace {

int64_t step_of(const Tensor& value, const std::string& where) {
  if (value.numel() != 1 || ops::is_string(value.dtype()))
    throw DataLossError(fmt::format(
        "TensorFlow checkpoint {}: its \"{}\" is {} {}, not one integer; pass a checkpoint that "
        "TensorFlow's Estimator wrote, or warm-start from this one (warm_start_from)",
        where, nn::kGlobalStepName, ops::dtype_name(value.dtype()), ops::shape_str(value.shape())));
  return static_cast<int64_t>(value.item());
}

}  // namespace

bool is_tf_prefix(const std::string& path) {
  std::error_code error;
  return !std::filesystem::is_regular_file(path, error) &&
         std::filesystem::is_regular_file(path + ".index", error);
}

TensorBundle load_tf_checkpoint(const std::string& path) {
  std::unique_ptr<CheckpointSource> source = open_checkpoint(path);
  TensorBundle bundle;
  for (const std::string& name : source->names()) {
    Tensor value = source->read(name);
    if (name == nn::kGlobalStepName) bundle.global_step = step_of(value, source->path());
    bundle.add_variable(name, std::move(value));
  }
  return bundle;
}

int64_t tf_checkpoint_global_step(const std::string& path) {
  std::unique_ptr<CheckpointSource> source = open_checkpoint(path);
  if (!source->contains(nn::kGlobalStepName)) return 0;
  return step_of(source->read(nn::kGlobalStepName), source->path());
}

}  // namespace est::checkpoint
