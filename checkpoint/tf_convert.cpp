// est HDF5 checkpoint <-> TensorFlow V2 checkpoint; see tf_convert.h.
#include "checkpoint/tf_convert.h"

#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_bundle_writer.h"
#include "checkpoint/variable_store_io.h"
#include "checkpoint/writer.h"
#include "nn/variable_store.h"
#include "ops/error.h"

namespace est::checkpoint {
namespace {

namespace fs = std::filesystem;

bool exists(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

[[noreturn]] void destination_exists(const std::string& what) {
  throw AlreadyExistsError(fmt::format(
      "{} already exists; convert never overwrites: pick another destination or delete it first",
      what));
}

// The step a TensorFlow checkpoint records: its global_step variable (int64, or int32 in old
// graphs), 0 without one.
int64_t step_of(const TensorBundle& bundle) {
  const TensorEntry* step = bundle.find(nn::kGlobalStepName);
  if (!step || step->value.numel() != 1) return 0;
  if (step->value.dtype() == ops::DType::kI64) return step->value.data<int64_t>()[0];
  return static_cast<int64_t>(step->value.item());
}

}  // namespace

ConvertResult convert_to_tf(const std::string& source, const std::string& prefix) {
  TensorBundle bundle;
  try {
    bundle = load(source);
  } catch (const NotFoundError&) {
    if (is_tf_checkpoint(source))
      throw InvalidArgumentError(fmt::format(
          "{} is a TensorFlow checkpoint already; `--to est` converts it into est's format",
          source));
    throw;
  }
  if (exists(prefix + ".index")) destination_exists(prefix + ".index");
  for (const std::string& file : tf_checkpoint_files(prefix)) destination_exists(file);
  const size_t written = write_tf_checkpoint(prefix, bundle);
  return {.written = prefix,
          .tensors = written,
          .blobs_left = bundle.blobs.size(),
          .global_step = bundle.global_step};
}

ConvertResult convert_to_est(const std::string& source, const std::string& destination) {
  std::unique_ptr<TfBundleReader> reader;
  try {
    reader = std::make_unique<TfBundleReader>(source);
  } catch (const NotFoundError&) {
    bool is_est = false;
    try {
      (void)read_info(source);
      is_est = true;
    } catch (const Error&) {
    }
    if (is_est)
      throw InvalidArgumentError(fmt::format(
          "{} is est's checkpoint already; `--to tf` converts it into TensorFlow's format",
          source));
    throw;
  }
  const bool to_file = destination.ends_with(".h5");
  if (to_file && exists(destination)) destination_exists(destination);
  std::error_code error;
  if (!to_file && exists(destination) && !fs::is_empty(destination, error))
    destination_exists(fmt::format("{} (not an empty directory)", destination));

  TensorBundle bundle;
  std::unordered_set<std::string> names;
  const std::vector<TfTensorInfo> infos = reader->list_variables();
  for (const TfTensorInfo& info : infos) names.insert(info.name);
  for (const TfTensorInfo& info : infos) {
    ops::Tensor value = reader->load_variable(info.name);  // dtype errors name the tensor
    if (extends_another(info.name, names))
      bundle.add_slot(info.name, std::move(value));
    else
      bundle.add_variable(info.name, std::move(value), info.name != nn::kGlobalStepName);
  }
  bundle.global_step = step_of(bundle);
  const std::string file =
      to_file ? destination
              : (fs::path(destination) / checkpoint_file_name("model.ckpt", bundle.global_step))
                    .string();
  save(file, bundle);
  if (!to_file) {
    CheckpointState state;
    state.model_checkpoint_path = fs::path(file).filename().string();
    state.all_model_checkpoint_paths = {state.model_checkpoint_path};
    write_checkpoint_state(destination, state);
  }
  return {.written = file, .tensors = bundle.tensors.size(), .global_step = bundle.global_step};
}

}  // namespace est::checkpoint
