// batch_norm_training / batch_norm_inference on the GPU: the registry's kBatchNorm and
// kBatchNormGradient over batch_norm_kernels.cu (why not cuDNN's batch norm: see there), with
// their double scratch from the caching allocator. Every axis but the last is folded into rows,
// as on the CPU, so rank 2 and rank 4 are one case.
#include "ops/cuda/kernels.h"
#include "ops/cuda/nn_launch.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

}  // namespace

void batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                Tensor& variance, double epsilon, bool training, Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  const int64_t channels = x.dim(-1), rows = channels == 0 ? 0 : x.numel() / channels;
  if (training && channels > 0) {
    Tensor scratch =
        Tensor::empty({batch_norm_scratch_size(rows, channels)}, DType::kF64, x.device());
    batch_norm_statistics(x.dtype(), x.raw_data(), mean.raw_data(), variance.raw_data(),
                          scratch.data<double>(), rows, channels, stream);
  }
  batch_norm_forward(x.dtype(), x.raw_data(), data_or_null(gamma), data_or_null(beta),
                     mean.raw_data(), variance.raw_data(), epsilon, y.raw_data(), rows, channels,
                     stream);
}

void batch_norm_gradient(const Tensor& x, const Tensor& gamma, const Tensor& /*beta*/,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  const int64_t channels = x.dim(-1), rows = channels == 0 ? 0 : x.numel() / channels;
  if (channels == 0) return;
  // The sums are needed by grad_gamma, grad_beta and a training grad_x.
  const bool need_sums = grad_gamma != nullptr || grad_beta != nullptr || training;
  // The scratch of the partial sums, then the sums.
  Tensor scratch;
  double* sums = nullptr;
  if (need_sums) {
    const int64_t partial = batch_norm_scratch_size(rows, channels);
    scratch = Tensor::empty({partial + 2 * channels}, DType::kF64, x.device());
    sums = scratch.data<double>() + partial;
    batch_norm_gradient_sums(x.dtype(), x.raw_data(), mean.raw_data(), variance.raw_data(),
                             grad.raw_data(), epsilon, scratch.data<double>(), sums,
                             grad_gamma ? grad_gamma->raw_data() : nullptr,
                             grad_beta ? grad_beta->raw_data() : nullptr, rows, channels, stream);
  }
  if (grad_x != nullptr)
    batch_norm_grad_x(x.dtype(), x.raw_data(), data_or_null(gamma), mean.raw_data(),
                      variance.raw_data(), grad.raw_data(), sums, epsilon, training,
                      grad_x->raw_data(), rows, channels, stream);
}

}  // namespace est::ops::cuda
