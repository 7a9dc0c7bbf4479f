// batch_norm_training and batch_norm_inference: argument checks, the registry's kBatchNorm
// kernels (OpKind::kBatchNorm picks the CPU backend) and the gradient records. Every axis but
// the last is folded into rows, so [N, C] dense outputs and [N, H, W, C] images are one case.
#include "ops/batch_norm.h"

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

// x: [..., C]; gamma, beta, and the statistics when given: [C] of x's dtype.
void check_arguments(const char* op, const Tensor& x, double epsilon,
                     std::initializer_list<std::pair<const Tensor*, const char*>> per_channel) {
  if (!x.defined()) throw InvalidArgumentError(fmt::format("{}: x is undefined", op));
  require_floating_dtype(x.dtype(), op);
  if (x.rank() < 2)
    throw InvalidArgumentError(fmt::format(
        "{}: x must have rank 2 or more ([N, C] or [N, H, W, C], channels last), got shape {}", op,
        shape_str(x.shape())));
  if (!(epsilon >= 0))
    throw InvalidArgumentError(
        fmt::format("{}: epsilon must be non-negative, got {}", op, epsilon));
  const int64_t channels = x.dim(-1);
  for (const auto& [t, what] : per_channel) {
    if (!t->defined()) continue;
    common_device(op, {&x, t});
    if (t->dtype() != x.dtype())
      throw InvalidArgumentError(fmt::format("{}: x is {} but {} is {}; cast one of them", op,
                                             dtype_name(x.dtype()), what, dtype_name(t->dtype())));
    if (t->rank() != 1 || t->dim(0) != channels)
      throw InvalidArgumentError(
          fmt::format("{}: {} has shape {} but x {} has {} channels (the last axis); expected [{}]",
                      op, what, shape_str(t->shape()), shape_str(x.shape()), channels, channels));
  }
}

// Records the gradient of a batch norm output; mean and variance are the statistics used.
Tensor record_batch_norm(Tensor y, const char* op, const Tensor& x, const Tensor& gamma,
                         const Tensor& beta, const Tensor& mean, const Tensor& variance,
                         double epsilon, bool training) {
  if (!needs_recording({&x, &gamma, &beta})) return y;
  return record(y, op, {x, gamma, beta},
                [op, x = x.detach(), gamma = gamma.detach(), beta = beta.detach(),
                 mean = mean.detach(), variance = variance.detach(), epsilon,
                 training](const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  Tensor grad_x, grad_gamma, grad_beta;
                  if (needs[0]) grad_x = Tensor::empty(x.shape(), x.dtype(), x.device());
                  if (needs[1]) grad_gamma = Tensor::empty(gamma.shape(), x.dtype(), x.device());
                  if (needs[2]) grad_beta = Tensor::empty(beta.shape(), x.dtype(), x.device());
                  run_kernel<OpId::kBatchNormGradient>(
                      op, x.device(), x.dtype(), x, gamma, beta, mean, variance, grad, epsilon,
                      training, needs[0] ? &grad_x : nullptr, needs[1] ? &grad_gamma : nullptr,
                      needs[2] ? &grad_beta : nullptr);
                  return {grad_x, grad_gamma, grad_beta};
                });
}

}  // namespace

BatchNormOutput batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon) {
  const char* op = "batch_norm_training";
  check_arguments(op, x, epsilon, {{&gamma, "gamma"}, {&beta, "beta"}});
  const int64_t channels = x.dim(-1);
  if (channels > 0 && x.numel() == 0)
    throw InvalidArgumentError(fmt::format(
        "{}: x {} has no elements to take statistics over; training needs a non-empty batch", op,
        shape_str(x.shape())));
  const Device device = x.device();
  BatchNormOutput result{Tensor::empty(x.shape(), x.dtype(), device),
                         Tensor::empty({channels}, x.dtype(), device),
                         Tensor::empty({channels}, x.dtype(), device)};
  run_kernel<OpId::kBatchNorm>(op, device, x.dtype(), x, gamma, beta, result.batch_mean,
                               result.batch_variance, epsilon, /*training=*/true, result.output);
  result.output = record_batch_norm(result.output, op, x, gamma, beta, result.batch_mean,
                                    result.batch_variance, epsilon, /*training=*/true);
  return result;
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  const char* op = "batch_norm_inference";
  if (!mean.defined() || !variance.defined())
    throw InvalidArgumentError(fmt::format(
        "{}: mean and variance are required (the moving statistics); use batch_norm_training to "
        "normalize with the batch's own",
        op));
  check_arguments(op, x, epsilon,
                  {{&gamma, "gamma"}, {&beta, "beta"}, {&mean, "mean"}, {&variance, "variance"}});
  const Device device = x.device();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device);
  Tensor mean_in = mean, variance_in = variance;  // read, not written, when not training
  run_kernel<OpId::kBatchNorm>(op, device, x.dtype(), x, gamma, beta, mean_in, variance_in, epsilon,
                               /*training=*/false, y);
  return record_batch_norm(y, op, x, gamma, beta, mean, variance, epsilon, /*training=*/false);
}

}  // namespace est::ops
