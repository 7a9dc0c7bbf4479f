// Convolution and pooling in TensorFlow's layouts: activations NHWC, kernels HWIO.
// Padding as TensorFlow computes it: `valid` uses no padding; `same` gives ceil(in / stride)
// outputs and puts the odd padding element at the end (bottom/right).
#pragma once

#include <array>

#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::ops {

enum class Padding : uint8_t { kValid, kSame };

struct Conv2DParams {
  std::array<int, 2> strides{1, 1};    // [h, w]
  Padding padding = Padding::kValid;
  std::array<int, 2> dilations{1, 1};  // [h, w]
  Activation activation = Activation::kNone;  // fused after the bias
};

// input: [N, H, W, C_in]; kernel: [KH, KW, C_in, C_out]; bias: [C_out] or undefined.
// Returns [N, OH, OW, C_out].
Tensor conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias,
              const Conv2DParams& params);

struct Pool2DParams {
  std::array<int, 2> window{2, 2};
  std::array<int, 2> strides{2, 2};
  Padding padding = Padding::kValid;
};

// input: [N, H, W, C]. avg_pool2d divides by the number of non-padding elements, as TensorFlow.
Tensor max_pool2d(const Tensor& input, const Pool2DParams& params);
Tensor avg_pool2d(const Tensor& input, const Pool2DParams& params);

// Output size of one spatial dimension, TensorFlow's rule. Throws InvalidArgumentError when the
// window does not fit (valid padding, input smaller than the dilated window).
int64_t conv_output_size(int64_t input, int64_t window, int stride, int dilation, Padding padding);

}  // namespace est::ops
