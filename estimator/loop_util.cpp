// The sessions' shared pieces: dataset and model_fn calls with checks, restore, hook checks.
#include "estimator/loop_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <set>

#include "checkpoint/state_file.h"
#include "checkpoint/variable_store_io.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::detail {

data::Dataset make_dataset(const InputFn& input_fn, ModeKeys mode,
                           const InputContext* input_context) {
  if (!input_fn)
    throw InvalidArgumentError(fmt::format(
        "input_fn is empty (mode {}); pass a function returning a data::Dataset", mode_name(mode)));
  data::Dataset dataset = input_fn(mode, input_context);
  if (!dataset.node())
    throw InvalidArgumentError(
        fmt::format("input_fn returned an empty Dataset (mode {}); return a pipeline such as "
                    "data::Dataset::from_tensor_slices(features, labels).batch(32)",
                    mode_name(mode)));
  return dataset;
}

EstimatorSpec call_model_fn(const ModelFn& model_fn, EstimatorContext& ctx,
                            const data::Element& element, ModeKeys mode, bool log_calls) {
  if (element.is_single())
    throw InvalidArgumentError(fmt::format(
        "input_fn's dataset yields single tensors ({}); model_fn needs (features, labels) "
        "elements: build the dataset with from_tensor_slices(features, labels) or map each "
        "element to data::Element(features, labels)",
        data::structure_str(element)));
  if (log_calls) log::info("Calling model_fn.");
  ctx.begin_call();
  ctx.records() = {};
  ModelFnCall in_call(ctx);
  EstimatorSpec spec = model_fn(element.features, element.labels, mode, ctx);
  spec.summaries = std::move(ctx.records().summaries);
  spec.named_tensors = std::move(ctx.records().named_tensors);
  if (log_calls) log::info("Done calling model_fn.");
  std::string where = fmt::format("model_fn (mode {})", mode_name(mode));
  if (spec.mode != mode)
    throw InvalidArgumentError(
        fmt::format("{} returned a spec for mode {}; return one for the mode it was called with",
                    where, mode_name(spec.mode)));
  spec.validate(where);
  return spec;
}

const checkpoint::Blob* Restored::blob(const std::string& name) const {
  for (const checkpoint::Blob& candidate : blobs)
    if (candidate.name == name) return &candidate;
  return nullptr;
}

std::optional<Restored> restore_checkpoint(const std::string& path_or_dir,
                                           const std::vector<nn::VariableStore*>& stores) {
  namespace fs = std::filesystem;
  if (!fs::exists(path_or_dir)) return std::nullopt;
  if (fs::is_directory(path_or_dir) && checkpoint::checkpoint_candidates(path_or_dir).empty())
    return std::nullopt;
  checkpoint::RestoreResult result = checkpoint::restore_store(path_or_dir, *stores.front());
  for (size_t i = 1; i < stores.size(); ++i) checkpoint::restore_store(result.path, *stores[i]);
  for (const std::string& skipped : result.skipped)
    log::warning("Checkpoint {} could not be read; restored the older {} instead", skipped,
                 result.path);
  log::info("Restoring parameters from {}", result.path);
  Restored restored{.path = result.path,
                    .global_step = result.global_step,
                    .names = std::move(result.unused),
                    .blobs = std::move(result.blobs)};
  return restored;
}

std::optional<Restored> restore_for_inference(const char* verb,
                                              const std::optional<std::string>& checkpoint_path,
                                              const std::string& model_dir,
                                              const std::vector<nn::VariableStore*>& stores) {
  std::string source =
      checkpoint_path ? *checkpoint_path : checkpoint::latest_checkpoint(model_dir).value_or("");
  std::optional<Restored> restored;
  if (!source.empty()) restored = restore_checkpoint(source, stores);
  if (checkpoint_path && !restored)
    throw NotFoundError(fmt::format("{}: no checkpoint at {}", verb, *checkpoint_path));
  if (!restored)
    log::warning("Could not find trained model in model_dir: {}, running initialization to {}.",
                 model_dir, verb);
  return restored;
}

void check_restored(const Restored& restored, const nn::VariableStore& store) {
  std::set<std::string> saved(restored.names.begin(), restored.names.end());
  for (const std::string& name : store.names())
    if (!saved.count(name))
      throw NotFoundError(fmt::format(
          "variable '{}' of the model is not in checkpoint {}: the model changed since it was "
          "saved; train in a new model_dir, or initialise from the old one with warm_start_from",
          name, restored.path));
}

void run_init_fn(const std::function<void(Session&)>& init_fn, Session& session,
                 const std::vector<nn::VariableStore*>& stores) {
  log::info("Running Scaffold.init_fn.");
  init_fn(session);
  for (size_t i = 1; i < stores.size(); ++i)
    if (stores[i] != &session.store())  // (replicas that share one store: nothing to copy)
      for (const nn::Variable& variable : session.store().variables())
        if (stores[i]->contains(variable.name))  // (global_step lives in the first only)
          stores[i]->assign(variable.name, variable.value);
}

void check_hooks(const Hooks& hooks, const char* where) {
  for (size_t i = 0; i < hooks.size(); ++i)
    if (!hooks[i]) throw InvalidArgumentError(fmt::format("{}: hooks[{}] is null", where, i));
}

std::string now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return text;
}

}  // namespace est::detail
