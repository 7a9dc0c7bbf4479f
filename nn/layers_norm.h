// batch_normalization, as tf.compat.v1.layers.batch_normalization / keras BatchNormalization
// over the last axis (channels of NHWC, features of [N, C]).
//
// In training it normalizes with the batch's statistics and moves `moving_mean` and
// `moving_variance` towards them in place (no gradient): moving = moving * momentum +
// batch * (1 - momentum). The batch variance in that update is TensorFlow's, which depends on
// the path TF takes (keras normalization/batch_normalization.py, build() and
// _fused_can_be_used; tensorflow/python/keras/layers/normalization.py in TF 1.x):
// - the fused kernel (tf.nn.fused_batch_norm), whose variance is Bessel-corrected
//   (n / (n - 1), n = the values per channel), for 4-D inputs (NHWC) and 5-D inputs (NDHWC, as
//   Keras since TF 2.x; TF 1.x's layer fused 4-D only) of float32;
// - the non-fused path (tf.nn.moments), whose variance is the biased batch variance (divided
//   by n), for every other input: [N, C] after a dense layer, 3-D [N, T, C], and float64 at
//   any rank (the fused kernel has no float64).
// The forward pass normalizes with the biased variance on both paths. In eval and predict it
// normalizes with the moving statistics.
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
  // The layer's dtype policy ("mixed_bfloat16", "float32", ...; nn/mixed_precision.h);
  // empty: the global policy.
  std::string dtype;
};

// x: [..., C]. Variables `<name>/gamma`, `<name>/beta` (trainable), `<name>/moving_mean`,
// `<name>/moving_variance` (not trainable), each [C]. Returns x's shape. Under a bfloat16
// compute dtype (mixed_bfloat16) the variables are float32 and the layer computes in float32,
// returning bfloat16 (nn/mixed_precision.h).
Tensor batch_normalization(ModelContext& ctx, const Tensor& x,
                           const BatchNormOptions& options = {});

}  // namespace est::nn
