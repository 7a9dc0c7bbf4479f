// batch_normalization, as tf.compat.v1.layers.batch_normalization / keras BatchNormalization
// over the last axis (channels of NHWC, features of [N, C]).
//
// In training it normalizes with the batch's statistics and moves `moving_mean` and
// `moving_variance` towards them in place (no gradient): moving = moving * momentum +
// batch * (1 - momentum), with the variance Bessel-corrected (n / (n - 1)) as TensorFlow's
// fused kernel and PyTorch do. In eval and predict it normalizes with the moving statistics.
#pragma once

#include <optional>
#include <string>

#include "nn/initializers.h"
#include "nn/model_context.h"

namespace est::nn {

struct BatchNormOptions {
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // learn beta
  bool scale = true;   // learn gamma
  Initializer beta_initializer = zeros();
  Initializer gamma_initializer = ones();
  Initializer moving_mean_initializer = zeros();
  Initializer moving_variance_initializer = ones();
  std::optional<bool> training;  // overrides ctx.is_training() (e.g. frozen statistics)
  std::string name;              // empty: "batch_normalization", "batch_normalization_1", ...
};

// x: [..., C]. Variables `<name>/gamma`, `<name>/beta` (trainable), `<name>/moving_mean`,
// `<name>/moving_variance` (not trainable), each [C]. Returns x's shape.
Tensor batch_normalization(ModelContext& ctx, const Tensor& x,
                           const BatchNormOptions& options = {});

}  // namespace est::nn
