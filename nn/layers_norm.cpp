// batch_normalization: variables, mode dispatch, and the moving-average update (through the
// model context, which applies it at once or defers it for a strategy to average).
#include "nn/layers_norm.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/layer_checks.h"
#include "nn/mixed_precision.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/batch_norm.h"
#include "ops/math.h"

namespace est::nn {
namespace {

// Whether TensorFlow would run this input through its fused kernel (and so move the moving
// variance towards the Bessel-corrected batch variance): float32 of rank 4 or 5.
bool tf_uses_fused_kernel(const Tensor& x) {
  return (x.rank() == 4 || x.rank() == 5) && x.dtype() == DType::kF32;
}

}  // namespace

Tensor batch_normalization(ModelContext& ctx, const Tensor& input,
                           const BatchNormOptions& options) {
  std::string name = ctx.layer_name("batch_normalization", options.name);
  check_layer_input(name, input, 1, "[..., channels]");
  if (!(options.momentum >= 0.0 && options.momentum <= 1.0))
    throw InvalidArgumentError(
        fmt::format("{}: momentum must be in [0, 1], got {}", name, options.momentum));
  if (!(options.epsilon > 0.0))
    throw InvalidArgumentError(
        fmt::format("{}: epsilon must be positive, got {}", name, options.epsilon));
  // Under a bfloat16 compute dtype the layer works in float32, its parameters and statistics
  // included, and casts its output back, as Keras's BatchNormalization does.
  const mixed_precision::LayerDtypes dtypes = mixed_precision::layer_dtypes(options.dtype, input);
  const bool upcast = dtypes.compute == DType::kBF16;
  const Tensor x =
      upcast ? ops::cast(input, DType::kF32) : mixed_precision::cast_input(dtypes, input);
  auto output = [&](const Tensor& y) { return upcast ? ops::cast(y, DType::kBF16) : y; };
  int64_t channels = x.shape().back();
  Shape shape{channels};
  DType dtype = upcast ? DType::kF32 : dtypes.variable;
  Tensor gamma = options.scale
                     ? ctx.get_variable(name + "/gamma", shape, dtype, options.gamma_initializer)
                     : Tensor::ones(shape, dtype);
  Tensor beta = options.center
                    ? ctx.get_variable(name + "/beta", shape, dtype, options.beta_initializer)
                    : Tensor::zeros(shape, dtype);
  Tensor moving_mean =
      ctx.get_variable(name + "/moving_mean", shape, dtype, options.moving_mean_initializer, false);
  Tensor moving_variance = ctx.get_variable(name + "/moving_variance", shape, dtype,
                                            options.moving_variance_initializer, false);

  bool training = options.training.value_or(ctx.is_training());
  if (!training)
    return output(
        ops::batch_norm_inference(x, gamma, beta, moving_mean, moving_variance, options.epsilon));

  ops::BatchNormOutput result = ops::batch_norm_training(x, gamma, beta, options.epsilon);
  ops::NoGradGuard no_grad;
  Tensor variance = result.batch_variance.detach();  // biased (divided by n)
  int64_t count = x.numel() / std::max<int64_t>(channels, 1);
  if (tf_uses_fused_kernel(x) && count > 1)  // the fused kernel's n / (n - 1); 1 when n is 1
    variance = ops::mul(variance, double(count) / double(count - 1));
  ctx.update_moving_average(moving_mean, result.batch_mean.detach(), options.momentum);
  ctx.update_moving_average(moving_variance, variance, options.momentum);
  return output(result.output);
}

}  // namespace est::nn
