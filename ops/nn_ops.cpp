// The fused cross-entropies and dropout: argument checks, the registry's kernels, and the
// gradient records. The softmax cross-entropies' kernels keep the softmax (and the
// log-sum-exp) of the forward pass for the backward one, which needs no further exp; class ids
// are checked by the kernel before any arithmetic. softmax/log_softmax are in softmax.cpp.
#include "ops/nn_ops.h"

#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::ops {

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "sparse_softmax_cross_entropy_with_logits";
  const Device device = common_device(kName, {&labels, &logits});
  cpu::require_index_dtype(kName, "labels", labels);
  cpu::require_floating(kName, logits);
  if (logits.rank() < 1 ||
      Shape(logits.shape().begin(), logits.shape().end() - 1) != labels.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; labels are class ids with the "
        "logits' shape minus the class axis (e.g. [N] for [N, C])",
        kName, shape_str(labels.shape()), shape_str(logits.shape())));
  Tensor loss = Tensor::empty(labels.shape(), logits.dtype(), device);
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype(), device);
  run_kernel<OpId::kSparseCrossEntropy>(kName, device, logits.dtype(), labels, logits, loss, probs);
  if (!needs_recording({&logits})) return loss;
  return record(loss, kName, {labels, logits},
                [labels = labels.detach(), probs](const Tensor& grad,
                                                  const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor dlogits = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
                  run_kernel<OpId::kSparseCrossEntropyGradient>(
                      kName, probs.device(), probs.dtype(), grad, labels, probs, dlogits);
                  return {Tensor(), dlogits};
                });
}

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "softmax_cross_entropy_with_logits";
  const Device device = common_device(kName, {&labels, &logits});
  cpu::require_floating(kName, logits);
  cpu::require_same_dtype(kName, labels, logits);
  if (logits.rank() < 1 || labels.shape() != logits.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; labels are probabilities of "
        "the logits' shape (use sparse_softmax_cross_entropy_with_logits for class ids)",
        kName, shape_str(labels.shape()), shape_str(logits.shape())));
  const Shape loss_shape(logits.shape().begin(), logits.shape().end() - 1);
  Tensor loss = Tensor::empty(loss_shape, logits.dtype(), device);
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype(), device);
  Tensor lse = Tensor::empty(loss_shape, logits.dtype(), device);
  run_kernel<OpId::kCrossEntropy>(kName, device, logits.dtype(), labels, logits, loss, probs, lse);
  if (!needs_recording({&labels, &logits})) return loss;
  return record(loss, kName, {labels, logits},
                [z = labels.detach(), x = logits.detach(), probs, lse](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  Tensor dlabels, dlogits;
                  if (needs[0]) dlabels = Tensor::empty(z.shape(), z.dtype(), z.device());
                  if (needs[1]) dlogits = Tensor::empty(z.shape(), z.dtype(), z.device());
                  run_kernel<OpId::kCrossEntropyGradient>(kName, x.device(), x.dtype(), grad, z, x,
                                                          probs, lse, needs[0] ? &dlabels : nullptr,
                                                          needs[1] ? &dlogits : nullptr);
                  return {dlabels, dlogits};
                });
}

// Elementwise max(x, 0) - x * z + log(1 + exp(-|x|)), as tf.nn.sigmoid_cross_entropy_with_logits.
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "sigmoid_cross_entropy_with_logits";
  const Device device = common_device(kName, {&labels, &logits});
  cpu::require_floating(kName, logits);
  cpu::require_same_dtype(kName, labels, logits);
  if (labels.shape() != logits.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; they must have one shape", kName,
        shape_str(labels.shape()), shape_str(logits.shape())));
  Tensor loss = Tensor::empty(logits.shape(), logits.dtype(), device);
  run_kernel<OpId::kSigmoidCrossEntropy>(kName, device, logits.dtype(), labels, logits, loss);
  if (!needs_recording({&labels, &logits})) return loss;
  return record(loss, kName, {labels, logits},
                [z = labels.detach(), x = logits.detach()](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  Tensor dlabels, dlogits;
                  if (needs[0]) dlabels = Tensor::empty(x.shape(), x.dtype(), x.device());
                  if (needs[1]) dlogits = Tensor::empty(x.shape(), x.dtype(), x.device());
                  run_kernel<OpId::kSigmoidCrossEntropyGradient>(
                      kName, x.device(), x.dtype(), grad, z, x, needs[0] ? &dlabels : nullptr,
                      needs[1] ? &dlogits : nullptr);
                  return {dlabels, dlogits};
                });
}

Tensor dropout(const Tensor& x, double rate, Generator& generator) {
  const Device device = common_device("dropout", {&x});
  cpu::require_floating("dropout", x);
  if (!(rate >= 0.0 && rate < 1.0))
    throw InvalidArgumentError(fmt::format(
        "dropout: rate must be in [0, 1), got {}; it is the fraction of elements dropped", rate));
  if (rate == 0.0) return x;
  Tensor mask = Tensor::empty(x.shape(), x.dtype(), device);
  run_kernel<OpId::kDropoutMask>("dropout", device, x.dtype(), rate, generator, mask);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(x, mask);
  }
  if (!needs_recording({&x})) return out;
  return record(out, "dropout", {x},
                [mask](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {mul(grad, mask)};
                });
}

}  // namespace est::ops
