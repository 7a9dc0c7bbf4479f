// Losses: input checks, the per-example op, then compute_weighted_loss. bfloat16 logits and
// predictions (a mixed_bfloat16 model's) are cast to float32 first and the loss is float32,
// as tf.keras's losses compute in float32 (nn/mixed_precision.h).
#include "nn/losses.h"

#include <fmt/format.h>

#include <unordered_set>
#include <vector>

#include "nn/mixed_precision.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/math.h"
#include "ops/nn_ops.h"

namespace est::nn {

using ops::shape_str;
namespace {

void check_float(std::string_view loss, std::string_view what, const Tensor& t) {
  if (!t.defined()) throw InvalidArgumentError(fmt::format("{}: {} is undefined", loss, what));
  if (!is_floating(t.dtype()))
    throw InvalidArgumentError(fmt::format("{}: {} must be float32, float64 or bfloat16, got {}",
                                           loss, what, dtype_name(t.dtype())));
}

void check_same_shape(std::string_view loss, const Tensor& labels, const Tensor& predictions,
                      std::string_view predictions_name) {
  if (!labels.defined()) throw InvalidArgumentError(fmt::format("{}: labels are undefined", loss));
  if (labels.shape() != predictions.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels have shape {} but {} have shape {}; they must match (reshape the labels, "
        "e.g. [N] -> [N, 1])",
        loss, shape_str(labels.shape()), predictions_name, shape_str(predictions.shape())));
}

// The predictions (or logits) of a loss whose labels have their shape: checked to be floating,
// in float32 when bfloat16, then checked against the labels' shape. `what` names them.
Tensor matched_predictions(std::string_view loss, const Tensor& labels, const Tensor& given,
                           std::string_view what) {
  check_float(loss, what, given);
  Tensor predictions = mixed_precision::to_float32_if_bfloat16(given);
  check_same_shape(loss, labels, predictions, what);
  return predictions;
}

void check_logits_matrix(std::string_view loss, const Tensor& logits) {
  if (logits.rank() != 2)
    throw InvalidArgumentError(fmt::format("{}: logits must be [batch, classes], got shape {}",
                                           loss, shape_str(logits.shape())));
}

void check_label_smoothing(std::string_view loss, double label_smoothing) {
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw InvalidArgumentError(
        fmt::format("{}: label_smoothing must be in [0, 1], got {}", loss, label_smoothing));
}

// Labels in the predictions' dtype (integer 0/1 labels are common for the elementwise losses).
Tensor as_dtype_of(const Tensor& labels, const Tensor& reference) {
  return labels.dtype() == reference.dtype() ? labels : ops::cast(labels, reference.dtype());
}

// numerator / denominator, or 0 where the denominator is 0 (tf.math.div_no_nan). The
// numerator is 0 whenever the denominator is (all weights zero), so adding 1 to a zero
// denominator gives exactly that.
Tensor div_no_nan(const Tensor& numerator, const Tensor& denominator) {
  Tensor is_zero = ops::cast(ops::equal(denominator, Tensor::zeros({}, denominator.dtype())),
                             denominator.dtype());
  return ops::div(numerator, ops::add(denominator, is_zero));
}

// The record of a loss function's reduction on its result, kept by nn (TF1 keeps it on the graph,
// `_last_loss_reduction`, not on an op): the result's gradient function is wrapped in this
// object, which calls it unchanged and carries the reduction; std::function::target finds it
// again. ops' autograd knows nothing of it.
struct ReducedLossBackward {
  ops::BackwardFn backward;
  Reduction reduction;
  std::vector<Tensor> operator()(const Tensor& grad_output, const ops::NeedsGrad& needs) const {
    return backward(grad_output, needs);
  }
};

// Records `reduction` on the loss's autograd node (nothing to record without one; a node
// recorded already takes the latest reduction).
Tensor with_reduction(Tensor loss, Reduction reduction) {
  const auto& node = loss.grad_node();
  if (!node) return loss;
  if (auto* recorded = node->backward.target<ReducedLossBackward>())
    recorded->reduction = reduction;
  else
    node->backward = ReducedLossBackward{std::move(node->backward), reduction};
  return loss;
}

Tensor weighted_loss(const Tensor& losses_given, const LossWeights& weights, Reduction reduction);

}  // namespace

Reduction loss_reduction(const Tensor& loss) {
  std::vector<const ops::GradNode*> queue;
  std::unordered_set<const ops::GradNode*> seen;
  if (const auto& node = loss.grad_node()) queue.push_back(node.get());
  for (size_t i = 0; i < queue.size(); ++i) {
    if (const auto* recorded = queue[i]->backward.target<ReducedLossBackward>())
      return recorded->reduction;
    for (const Tensor& input : queue[i]->inputs)
      if (const auto& node = input.grad_node(); node && seen.insert(node.get()).second)
        queue.push_back(node.get());
  }
  return Reduction::kSumByNonzeroWeights;
}

bool is_mean_reduction(Reduction reduction) { return reduction != Reduction::kSum; }

Tensor compute_weighted_loss(const Tensor& losses, const LossWeights& weights,
                             Reduction reduction) {
  return with_reduction(weighted_loss(losses, weights, reduction), reduction);
}

namespace {

Tensor weighted_loss(const Tensor& losses_given, const LossWeights& weights, Reduction reduction) {
  check_float("compute_weighted_loss", "losses", losses_given);
  const Tensor losses = mixed_precision::to_float32_if_bfloat16(losses_given);
  const Shape& shape = losses.shape();
  Tensor weighted;
  Tensor weight_tensor;  // broadcast to `shape`, no gradient (denominators only)
  if (weights.is_tensor()) {
    weight_tensor = as_dtype_of(weights.tensor(), losses);
    if (ops::broadcast_shapes(shape, weight_tensor.shape()) != shape)
      throw InvalidArgumentError(fmt::format(
          "loss weights of shape {} do not broadcast to the losses' shape {}; use a scalar, "
          "one weight per example, or the losses' shape",
          shape_str(weight_tensor.shape()), shape_str(shape)));
    weighted = ops::mul(losses, weight_tensor);
  } else {
    weighted = weights.scalar() == 1.0 ? losses : ops::mul(losses, weights.scalar());
  }
  if (reduction == Reduction::kNone) return weighted;
  Tensor total = ops::sum(weighted);
  double count = double(losses.numel());
  switch (reduction) {
    case Reduction::kNone:
    case Reduction::kSum:
      return total;
    case Reduction::kSumOverBatchSize:
      return ops::mul(total, count > 0 ? 1.0 / count : 0.0);
    case Reduction::kMean:
    case Reduction::kSumByNonzeroWeights: {
      if (!weights.is_tensor()) {
        double w = weights.scalar();
        double denominator = reduction == Reduction::kMean ? w * count : (w != 0 ? count : 0);
        return ops::mul(total, denominator != 0 ? 1.0 / denominator : 0.0);
      }
      Tensor denominator;
      {
        ops::NoGradGuard no_grad;
        Tensor broadcast = ops::broadcast_to(weight_tensor.detach(), shape);
        if (reduction == Reduction::kMean) {
          denominator = ops::sum(broadcast);
        } else {
          Tensor zero = Tensor::zeros({}, broadcast.dtype());
          Tensor zeros_count = ops::sum(ops::cast(ops::equal(broadcast, zero), broadcast.dtype()));
          denominator = ops::add(ops::mul(zeros_count, -1.0), count);
        }
      }
      return div_no_nan(total, denominator);
    }
  }
  throw InternalError("compute_weighted_loss: unknown reduction");
}

}  // namespace

Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits_given,
                                    const LossWeights& weights, Reduction reduction) {
  constexpr std::string_view kName = "sparse_softmax_cross_entropy";
  check_float(kName, "logits", logits_given);
  const Tensor logits = mixed_precision::to_float32_if_bfloat16(logits_given);
  if (!labels.defined())
    throw InvalidArgumentError("sparse_softmax_cross_entropy: labels are undefined");
  if (labels.dtype() != DType::kI32 && labels.dtype() != DType::kI64)
    throw InvalidArgumentError(fmt::format(
        "{}: labels must be int32 or int64 class ids, got {}; for one-hot or probability labels "
        "use softmax_cross_entropy",
        kName, dtype_name(labels.dtype())));
  check_logits_matrix(kName, logits);
  Tensor ids = labels.rank() == 2 && labels.dim(1) == 1 ? labels.reshape({labels.dim(0)}) : labels;
  if (ids.rank() != 1 || ids.dim(0) != logits.dim(0))
    throw InvalidArgumentError(fmt::format(
        "{}: labels must be [batch] (one class id per example) matching logits {}, got shape {}",
        kName, shape_str(logits.shape()), shape_str(labels.shape())));
  return compute_weighted_loss(ops::sparse_softmax_cross_entropy_with_logits(ids, logits), weights,
                               reduction);
}

Tensor softmax_cross_entropy(const Tensor& onehot_labels, const Tensor& logits_given,
                             const LossWeights& weights, double label_smoothing,
                             Reduction reduction) {
  constexpr std::string_view kName = "softmax_cross_entropy";
  const Tensor logits = matched_predictions(kName, onehot_labels, logits_given, "logits");
  check_logits_matrix(kName, logits);
  check_label_smoothing(kName, label_smoothing);
  Tensor labels = as_dtype_of(onehot_labels, logits);
  if (label_smoothing > 0) {
    double classes = double(logits.dim(1));
    labels = ops::add(ops::mul(labels, 1.0 - label_smoothing), label_smoothing / classes);
  }
  return compute_weighted_loss(ops::softmax_cross_entropy_with_logits(labels, logits), weights,
                               reduction);
}

Tensor sigmoid_cross_entropy(const Tensor& multi_class_labels, const Tensor& logits_given,
                             const LossWeights& weights, double label_smoothing,
                             Reduction reduction) {
  constexpr std::string_view kName = "sigmoid_cross_entropy";
  const Tensor logits = matched_predictions(kName, multi_class_labels, logits_given, "logits");
  check_label_smoothing(kName, label_smoothing);
  Tensor labels = as_dtype_of(multi_class_labels, logits);
  if (label_smoothing > 0)
    labels = ops::add(ops::mul(labels, 1.0 - label_smoothing), 0.5 * label_smoothing);
  return compute_weighted_loss(ops::sigmoid_cross_entropy_with_logits(labels, logits), weights,
                               reduction);
}

Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions_given,
                          const LossWeights& weights, Reduction reduction) {
  const Tensor predictions =
      matched_predictions("mean_squared_error", labels, predictions_given, "predictions");
  return compute_weighted_loss(
      ops::squared_difference(predictions, as_dtype_of(labels, predictions)), weights, reduction);
}

Tensor huber(const Tensor& labels, const Tensor& predictions_given, const LossWeights& weights,
             double delta, Reduction reduction) {
  const Tensor predictions = matched_predictions("huber", labels, predictions_given, "predictions");
  if (!(delta > 0))
    throw InvalidArgumentError(fmt::format("huber: delta must be positive, got {}", delta));
  Tensor error = ops::abs(ops::sub(predictions, as_dtype_of(labels, predictions)));
  Tensor quadratic = ops::clip(error, 0.0, delta);
  Tensor linear = ops::sub(error, quadratic);
  Tensor losses = ops::add(ops::mul(ops::square(quadratic), 0.5), ops::mul(linear, delta));
  return compute_weighted_loss(losses, weights, reduction);
}

}  // namespace est::nn
