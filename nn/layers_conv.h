// conv2d and the 2-D pooling layers, as tf.compat.v1.layers / keras.layers, in NHWC with HWIO
// kernels (so Keras weights load without transposition).
#pragma once

#include <string>

#include "nn/activation.h"
#include "nn/initializers.h"
#include "nn/model_context.h"
#include "ops/conv.h"

namespace est::nn {

// A height/width pair that reads like Keras's int-or-tuple arguments: `3` or `{3, 5}`.
struct Size2 {
  int h = 0;
  int w = 0;
  constexpr Size2() = default;
  constexpr Size2(int both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  constexpr Size2(int height, int width) : h(height), w(width) {}
  constexpr bool is_set() const { return h != 0 || w != 0; }
  bool operator==(const Size2&) const = default;
};

using ops::Padding;
inline constexpr Padding valid = Padding::kValid;
inline constexpr Padding same = Padding::kSame;

struct Conv2DOptions {
  int64_t filters = 0;
  Size2 kernel;  // kernel_size
  Size2 strides = 1;
  Padding padding = valid;
  Size2 dilation_rate = 1;
  Activation activation;
  bool use_bias = true;
  Initializer kernel_initializer = glorot_uniform();
  Initializer bias_initializer = zeros();
  std::string name;  // empty: "conv2d", "conv2d_1", ...
  // The layer's dtype policy ("mixed_bfloat16", "float32", ...; nn/mixed_precision.h);
  // empty: the global policy.
  std::string dtype;
};

// x: [N, H, W, C]. Variables `<name>/kernel` [KH, KW, C, filters] and `<name>/bias` [filters].
// Returns [N, OH, OW, filters].
Tensor conv2d(ModelContext& ctx, const Tensor& x, const Conv2DOptions& options);

// x: [N, H, W, C]. `strides` defaults to `pool_size`, as in Keras.
Tensor max_pooling2d(const Tensor& x, Size2 pool_size, Size2 strides = {}, Padding padding = valid);
Tensor average_pooling2d(const Tensor& x, Size2 pool_size, Size2 strides = {},
                         Padding padding = valid);

}  // namespace est::nn
