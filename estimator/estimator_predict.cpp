// Estimator::predict: restore, run model_fn(PREDICT) batch by batch, and hand out one map per
// example (each selected prediction split along its first dimension).
#include <fmt/format.h>

#include "data/element.h"
#include "estimator/estimator.h"
#include "estimator/loop_util.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

// The selected predictions of one batch, checked: every key known, every tensor batched
// alike.
std::vector<std::pair<std::string, Tensor>> select(const Predictions& predictions,
                                                   const std::vector<std::string>& keys) {
  std::vector<std::pair<std::string, Tensor>> selected;
  if (keys.empty()) {
    selected.assign(predictions.begin(), predictions.end());
  } else {
    for (const std::string& key : keys) {
      auto it = predictions.find(key);
      if (it == predictions.end()) {
        std::string known;
        for (const auto& [name, tensor] : predictions) known += (known.empty() ? "" : ", ") + name;
        throw NotFoundError(fmt::format(
            "predict: predict_keys names '{}', which model_fn's predictions lack (they are: {})",
            key, known));
      }
      selected.emplace_back(key, it->second);
    }
  }
  int64_t batch = -1;
  std::string first;
  for (const auto& [name, tensor] : selected) {
    if (tensor.rank() == 0)
      throw InvalidArgumentError(fmt::format(
          "predict: prediction '{}' is a scalar; predictions need a batch dimension first", name));
    if (batch < 0) {
      batch = tensor.dim(0);
      first = name;
    } else if (tensor.dim(0) != batch) {
      throw InvalidArgumentError(fmt::format(
          "predict: prediction '{}' has shape {} but '{}' has batch size {}; all predictions "
          "must share their first dimension",
          name, ops::shape_str(tensor.shape()), first, batch));
    }
  }
  return selected;
}

}  // namespace

void Estimator::predict(const InputFn& input_fn, const std::function<bool(Predictions)>& consume,
                        const std::vector<std::string>& predict_keys, const Hooks& hooks,
                        const std::optional<std::string>& checkpoint_path) {
  if (!consume) throw InvalidArgumentError("predict: the consumer function is empty");
  detail::check_hooks(hooks, "predict");
  nn::VariableStore store;
  EstimatorContext ctx(store, ModeKeys::kPredict, seed_, params_, config_);
  std::string source = checkpoint_path ? *checkpoint_path : latest_checkpoint().value_or("");
  std::optional<detail::Restored> restored;
  if (!source.empty()) restored = detail::restore_checkpoint(source, {&store});
  if (checkpoint_path && !restored)
    throw NotFoundError(fmt::format("predict: no checkpoint at {}", *checkpoint_path));
  if (!restored)
    log::warning(
        "Could not find trained model in model_dir: {}, running initialization to "
        "predict.",
        model_dir());

  ops::NoGradGuard no_grad;
  data::Iterator iterator = detail::make_dataset(input_fn, ModeKeys::kPredict).iterator();
  Session session(store, ModeKeys::kPredict, model_dir(), config_);
  Hooks all_hooks(hooks.begin(), hooks.end());
  StepTimings timings;
  bool first = true, stop = false;
  while (!stop) {
    timings.input_begin = detail::steady_seconds();
    std::optional<data::Element> element = iterator.next();
    if (!element) break;
    timings.model_fn_begin = detail::steady_seconds();
    EstimatorSpec spec = detail::call_model_fn(model_fn_, ctx, *element, ModeKeys::kPredict, first);
    timings.model_fn_end = timings.run_begin = detail::steady_seconds();
    int64_t step = session.global_step();
    if (first) {
      if (restored) detail::check_restored(*restored, store);
      all_hooks.insert(all_hooks.end(), spec.prediction_hooks.begin(), spec.prediction_hooks.end());
      detail::begin_hooks(all_hooks);
      // A hook that assigned in after_create_session: the first batch sees its values, as TF's.
      if (detail::after_create_session(all_hooks, session))
        spec = detail::call_model_fn(model_fn_, ctx, *element, ModeKeys::kPredict, false);
      first = false;
    }
    SessionRunContext run_context(session, spec, step, timings);
    std::vector<SessionRunArgs> args = detail::before_run(all_hooks, run_context);
    auto selected = select(spec.predictions, predict_keys);
    timings.run_end = detail::steady_seconds();
    detail::after_run(all_hooks, run_context,
                      detail::resolve_fetches(args, spec, session, step, step));
    for (auto& entry : selected) entry.second = entry.second.to(Device::cpu());  // rows on host
    int64_t batch = selected.front().second.dim(0);
    for (int64_t row = 0; row < batch && !stop; ++row) {
      Predictions example;
      for (const auto& [name, tensor] : selected) example[name] = data::slice_row(tensor, row);
      if (!consume(std::move(example))) stop = true;
    }
    if (run_context.stop_requested()) stop = true;
  }
  if (!first) detail::end_hooks(all_hooks, session);
}

std::vector<Predictions> Estimator::predict(const InputFn& input_fn,
                                            const std::vector<std::string>& predict_keys,
                                            const Hooks& hooks,
                                            const std::optional<std::string>& checkpoint_path) {
  std::vector<Predictions> all;
  predict(
      input_fn,
      [&](Predictions example) {
        all.push_back(std::move(example));
        return true;
      },
      predict_keys, hooks, checkpoint_path);
  return all;
}

}  // namespace est
