// The loops' shared pieces: dataset and model_fn calls with checks, restore, fetches, hooks.
#include "estimator/loop_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
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

void check_restored(const Restored& restored, const nn::VariableStore& store) {
  std::set<std::string> saved(restored.names.begin(), restored.names.end());
  for (const std::string& name : store.names())
    if (!saved.count(name))
      throw NotFoundError(fmt::format(
          "variable '{}' of the model is not in checkpoint {}: the model changed since it was "
          "saved; train in a new model_dir, or initialise from the old one with warm_start_from",
          name, restored.path));
}

namespace {

// A tensor model_fn named (est::identity or a summary), by its name or TF's "name:0".
std::optional<Tensor> find_named_tensor(const EstimatorSpec& spec, const std::string& name) {
  std::string_view key = name;
  if (key.size() > 2 && key.substr(key.size() - 2) == ":0") key.remove_suffix(2);
  auto it = spec.named_tensors.find(std::string(key));
  if (it == spec.named_tensors.end()) return std::nullopt;
  return it->second;
}

}  // namespace

SessionRunValues resolve_fetches(const std::vector<SessionRunArgs>& args, const EstimatorSpec& spec,
                                 const Session& session, int64_t step_before, int64_t step_after) {
  SessionRunValues values;
  values.global_step = step_after;
  for (const SessionRunArgs& request : args) {
    for (const auto& [key, tensor] : request.tensors) values.results[key] = tensor;
    for (const std::string& name : request.fetches) {
      if (values.results.count(name)) continue;
      Tensor value;
      if (name == "loss" && spec.loss.defined()) {
        value = spec.loss;
      } else if (name == "global_step") {
        value = Tensor::scalar(static_cast<double>(step_before), DType::kI64);
      } else if (auto it = spec.predictions.find(name); it != spec.predictions.end()) {
        value = it->second;
      } else if (auto named = find_named_tensor(spec, name)) {
        value = *named;
      } else if (auto variable = session.store().find(name)) {
        value = variable->value;
      } else {
        std::string known = "loss, global_step";
        for (const auto& [key, tensor] : spec.predictions) known += ", " + key;
        for (const auto& [key, tensor] : spec.named_tensors) known += ", " + key;
        throw NotFoundError(fmt::format(
            "a hook asked for '{}', which is neither a fetchable name ({}) nor a variable; "
            "supply the tensor in SessionRunArgs::tensors instead",
            name, known));
      }
      values.results[name] = value;
    }
  }
  return values;
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

void begin_hooks(const Hooks& hooks) {
  for (const auto& hook : hooks) hook->begin();
}

namespace {

// FNV-1a over the bytes of every dense variable (host copies), 8 bytes at a time.
uint64_t variables_digest(const nn::VariableStore& store) {
  uint64_t digest = 14695981039346656037ull;
  auto mix = [&digest](uint64_t word) { digest = (digest ^ word) * 1099511628211ull; };
  for (const nn::Variable& variable : store.variables()) {
    if (variable.value.is_sparse() || variable.value.dtype() == DType::kString) continue;
    const Tensor host = variable.value.to(Device::cpu());
    const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
    const size_t size = host.nbytes();
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes + i, 8);
      mix(word);
    }
    for (; i < size; ++i) mix(bytes[i]);
  }
  return digest;
}

}  // namespace

bool after_create_session(const Hooks& hooks, Session& session) {
  if (hooks.empty()) return false;
  const uint64_t before = variables_digest(session.store());
  for (const auto& hook : hooks) hook->after_create_session(session);
  return variables_digest(session.store()) != before;
}

std::vector<SessionRunArgs> before_run(const Hooks& hooks, SessionRunContext& run_context) {
  std::vector<SessionRunArgs> args;
  args.reserve(hooks.size());
  for (const auto& hook : hooks) args.push_back(hook->before_run(run_context));
  return args;
}

void after_run(const Hooks& hooks, SessionRunContext& run_context, const SessionRunValues& values) {
  for (const auto& hook : hooks) hook->after_run(run_context, values);
}

void end_hooks(const Hooks& hooks, Session& session) {
  for (const auto& hook : hooks) hook->end(session);
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
