// The Head base class: what every head does the same way (tensorflow/estimator
// head/base_head.py and each head's create_estimator_spec): weights from the weight column,
// the weighted and reduced training loss, `loss` and `regularization_loss` metrics, and the
// spec per mode (PREDICT's with the head's export_outputs, as TF's heads).
#include "estimator/canned/head.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "estimator/canned/head_util.h"
#include "ops/math.h"

namespace est::canned {

Head::Head(HeadOptions options) : options_(std::move(options)) {
  if (options_.loss_reduction == nn::Reduction::kNone)
    throw InvalidArgumentError(
        "head: loss_reduction must reduce to a scalar (kSumOverBatchSize, TF2's default, or "
        "kSum, TF1 canned estimators'); kNone is not allowed");
}

void Head::check_logits(const Tensor& logits) const {
  if (!logits.defined() || logits.rank() != 2 || logits.dim(1) != logits_dimension())
    throw InvalidArgumentError(fmt::format(
        "{}: logits must be [batch, {}], got [{}]", kind(), logits_dimension(),
        logits.defined() ? fmt::format("{}", fmt::join(logits.shape(), ", ")) : "undefined"));
}

Head::LossParts Head::loss_parts(const Tensor& labels, const Tensor& logits,
                                 const Features& features) const {
  check_logits(logits);
  LossParts parts;
  parts.labels = processed_labels(labels, logits);
  parts.unweighted_loss = unweighted_loss(parts.labels, logits);
  if (!options_.weight_column.empty()) {
    auto found = features.find(options_.weight_column);
    if (found == features.end())
      throw InvalidArgumentError(fmt::format(
          "{}: weight_column '{}' is not among the features; the input_fn must provide it", kind(),
          options_.weight_column));
    parts.weights =
        detail::reshape_weights(found->second, logits, parts.unweighted_loss.dim(1) != 1, kind());
  }
  return parts;
}

Tensor Head::loss(const Tensor& labels, const Tensor& logits, const Features& features,
                  const std::vector<Tensor>& regularization_losses) const {
  const LossParts parts = loss_parts(labels, logits, features);
  const nn::LossWeights weights =
      parts.weights.defined() ? nn::LossWeights(parts.weights) : nn::LossWeights(1.0);
  Tensor loss = nn::compute_weighted_loss(parts.unweighted_loss, weights, options_.loss_reduction);
  for (const Tensor& regularization : regularization_losses) loss = ops::add(loss, regularization);
  return loss;
}

MetricOps Head::metrics(const Tensor& labels, const Tensor& logits, const Features& features,
                        const std::vector<Tensor>& regularization_losses) const {
  MetricOps out = head_metrics(loss_parts(labels, logits, features), logits);
  out["loss"] = nn::metrics::mean(loss(labels, logits, features, regularization_losses));
  if (!regularization_losses.empty()) {
    Tensor total = regularization_losses.front();
    for (size_t i = 1; i < regularization_losses.size(); ++i)
      total = ops::add(total, regularization_losses[i]);
    out["regularization_loss"] = nn::metrics::mean(total);
  }
  return out;
}

EstimatorSpec Head::create_estimator_spec(const Features& features, ModeKeys mode,
                                          const Tensor& logits, const Tensor& labels,
                                          nn::ModelContext& ctx,
                                          const std::optional<optim::Optimizer>& optimizer,
                                          const std::vector<Tensor>& regularization_losses) const {
  check_logits(logits);
  Predictions predicted = predictions(logits);
  if (mode == ModeKeys::kPredict) {
    std::map<std::string, ExportOutput> outputs = export_outputs(predicted);
    return EstimatorSpec::predict(std::move(predicted), std::move(outputs));
  }
  if (mode == ModeKeys::kEval) {
    Tensor eval_loss = loss(labels, logits, features, regularization_losses);
    return EstimatorSpec(
        {.mode = ModeKeys::kEval,
         .predictions = std::move(predicted),
         .loss = eval_loss,
         .eval_metric_ops = metrics(labels, logits, features, regularization_losses)});
  }
  if (!optimizer)
    throw InvalidArgumentError(fmt::format(
        "{}: create_estimator_spec in TRAIN needs an optimizer (e.g. optim::adagrad(0.05))",
        kind()));
  Tensor train_loss = loss(labels, logits, features, regularization_losses);
  // The head's reduction, passed explicitly: it decides the loss scaling under a strategy.
  nn::TrainOp train_op =
      optimizer->minimize(train_loss, ctx, {.loss_reduction = options_.loss_reduction});
  return EstimatorSpec({.mode = ModeKeys::kTrain,
                        .predictions = std::move(predicted),
                        .loss = train_loss,
                        .train_op = std::move(train_op)});
}

}  // namespace est::canned
