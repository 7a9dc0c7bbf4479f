// PredictionSession: restore, model_fn(PREDICT) batch by batch and the predictions
// predict_keys selects, inside the hooks' life cycle (HookedSession).
#include "estimator/prediction_session.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est::detail {
namespace {

// The selected predictions of one batch, checked: every key known, every tensor batched
// alike.
BatchPredictions select(const Predictions& predictions, const std::vector<std::string>& keys) {
  BatchPredictions selected;
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

PredictionSession::PredictionSession(PredictionSessionOptions options)
    : options_(std::move(options)),
      context_(store_, ModeKeys::kPredict, options_.model.seed, *options_.model.params,
               *options_.model.config),
      restored_(restore_for_inference("predict", options_.checkpoint_path,
                                      options_.model.config->model_dir, {&store_})),
      iterator_(make_dataset(options_.model.input_fn, ModeKeys::kPredict).iterator()),
      hooked_(Session(store_, ModeKeys::kPredict, options_.model.config->model_dir,
                      *options_.model.config),
              options_.hooks) {}

std::vector<data::Element> PredictionSession::next_batch() {
  timings_.input_begin = steady_seconds();
  std::optional<data::Element> element = iterator_.next();
  if (!element) return {};
  return {std::move(*element)};
}

BatchPredictions PredictionSession::run(const std::vector<data::Element>& batch) {
  if (batch.empty()) {
    stopped_ = true;
    return {};
  }
  const data::Element& element = batch.front();
  timings_.model_fn_begin = steady_seconds();
  const bool first = !hooked_.began();
  EstimatorSpec spec =
      call_model_fn(options_.model.model_fn, context_, element, ModeKeys::kPredict, first);
  int64_t step = hooked_.session().global_step();
  if (first) {
    if (restored_) check_restored(*restored_, store_);
    // A hook that assigned in after_create_session: the first batch sees its values, as TF's.
    if (hooked_.create(spec.prediction_hooks))
      spec = call_model_fn(options_.model.model_fn, context_, element, ModeKeys::kPredict, false);
  }
  timings_.model_fn_end = steady_seconds();
  BatchPredictions selected;
  if (hooked_.run(spec, step, timings_,
                  [&] { selected = select(spec.predictions, options_.predict_keys); }))
    stopped_ = true;
  for (auto& entry : selected) entry.second = entry.second.to(Device::cpu());  // rows on host
  return selected;
}

}  // namespace est::detail
