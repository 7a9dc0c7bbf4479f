// batch_normalization: variables, mode dispatch, and the moving-average update (through the
// model context, which applies it at once or defers it for a strategy to average).
#include "nn/layers_norm.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/layer_checks.h"
#include "ops/autograd.h"
#include "ops/batch_norm.h"
#include "ops/math.h"

namespace est::nn {
Tensor batch_normalization(ModelContext& ctx, const Tensor& x, const BatchNormOptions& options) {
  std::string name = ctx.layer_name("batch_normalization", options.name);
  check_layer_input(name, x, 1, "[..., channels]");
  if (!(options.momentum >= 0.0 && options.momentum <= 1.0))
    throw InvalidArgumentError(
        fmt::format("{}: momentum must be in [0, 1], got {}", name, options.momentum));
  if (!(options.epsilon > 0.0))
    throw InvalidArgumentError(
        fmt::format("{}: epsilon must be positive, got {}", name, options.epsilon));
  int64_t channels = x.shape().back();
  Shape shape{channels};
  DType dtype = x.dtype();
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
    return ops::batch_norm_inference(x, gamma, beta, moving_mean, moving_variance, options.epsilon);

  ops::BatchNormOutput result = ops::batch_norm_training(x, gamma, beta, options.epsilon);
  ops::NoGradGuard no_grad;
  int64_t count = x.numel() / std::max<int64_t>(channels, 1);
  double bessel = count > 1 ? double(count) / double(count - 1) : 1.0;
  ctx.update_moving_average(moving_mean, result.batch_mean.detach(), options.momentum);
  ctx.update_moving_average(moving_variance, ops::mul(result.batch_variance.detach(), bessel),
                            options.momentum);
  return result.output;
}

}  // namespace est::nn
