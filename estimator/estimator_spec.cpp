// EstimatorSpec: the per-mode field requirements, with messages that name the field.
#include "estimator/estimator_spec.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est {

EstimatorSpec::EstimatorSpec(EstimatorSpecFields fields) : EstimatorSpecFields(std::move(fields)) {
  validate();
}

EstimatorSpec EstimatorSpec::train(Tensor loss, nn::TrainOp train_op, Hooks training_hooks) {
  return EstimatorSpec({.mode = ModeKeys::kTrain,
                        .loss = std::move(loss),
                        .train_op = std::move(train_op),
                        .training_hooks = std::move(training_hooks)});
}

EstimatorSpec EstimatorSpec::eval(Tensor loss, MetricOps eval_metric_ops, Hooks evaluation_hooks) {
  return EstimatorSpec({.mode = ModeKeys::kEval,
                        .loss = std::move(loss),
                        .eval_metric_ops = std::move(eval_metric_ops),
                        .evaluation_hooks = std::move(evaluation_hooks)});
}

EstimatorSpec EstimatorSpec::predict(Predictions predictions,
                                     std::map<std::string, ExportOutput> export_outputs,
                                     Hooks prediction_hooks) {
  return EstimatorSpec({.mode = ModeKeys::kPredict,
                        .predictions = std::move(predictions),
                        .export_outputs = std::move(export_outputs),
                        .prediction_hooks = std::move(prediction_hooks)});
}

void EstimatorSpec::validate(const std::string& where) const {
  std::string mode_text(mode_name(mode));
  auto fail = [&](const std::string& message) {
    throw InvalidArgumentError(fmt::format("{}: {}", where, message));
  };
  if (mode != ModeKeys::kPredict) {
    if (!loss.defined())
      fail(fmt::format("`loss` is missing; mode {} needs a scalar loss tensor", mode_text));
    if (loss.numel() != 1 || loss.rank() > 1)
      fail(fmt::format("`loss` must be a scalar, got shape {}; reduce it (e.g. ops::mean)",
                       ops::shape_str(loss.shape())));
  } else if (loss.defined() && loss.numel() != 1) {
    fail(fmt::format("`loss` must be a scalar, got shape {}", ops::shape_str(loss.shape())));
  }
  if (mode == ModeKeys::kTrain && !train_op.defined())
    fail("`train_op` is missing; mode train needs one (optimizer.minimize(loss, ctx))");
  if (mode == ModeKeys::kPredict && predictions.empty())
    fail("`predictions` is empty; mode infer needs at least one named prediction tensor");
  for (const auto& [name, tensor] : predictions)
    if (!tensor.defined()) fail(fmt::format("`predictions[\"{}\"]` is undefined", name));
  for (const auto& [name, output] : export_outputs) {
    if (output.outputs().empty())
      fail(fmt::format("`export_outputs[\"{}\"]` has no output tensors", name));
    for (const auto& [key, tensor] : output.outputs())
      if (!tensor.defined())
        fail(fmt::format("`export_outputs[\"{}\"]` output '{}' is undefined", name, key));
  }
  for (const auto& [name, op] : eval_metric_ops)
    if (!op.metric) fail(fmt::format("`eval_metric_ops[\"{}\"]` holds no metric", name));
  auto check_hooks = [&](const Hooks& hooks, const char* field) {
    for (size_t i = 0; i < hooks.size(); ++i)
      if (!hooks[i]) fail(fmt::format("`{}[{}]` is a null hook", field, i));
  };
  check_hooks(training_hooks, "training_hooks");
  check_hooks(training_chief_hooks, "training_chief_hooks");
  check_hooks(evaluation_hooks, "evaluation_hooks");
  check_hooks(prediction_hooks, "prediction_hooks");
}

}  // namespace est
