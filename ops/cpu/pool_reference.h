// Reference 2-D max and average pooling over NHWC data, float32 and float64. Max pooling's
// gradient goes to the first maximum of each window (row-major scan), recomputed from the
// input; average pooling divides by the number of in-bounds elements, as TensorFlow does.
#pragma once

#include "ops/cpu/window.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

enum class PoolKind : uint8_t { kMax, kAverage };

// output [N, OH, OW, C] from input [N, H, W, C].
void pool2d_forward_reference(const Tensor& input, Tensor& output, const Window2D& window,
                              PoolKind kind);

// grad_input [N, H, W, C] from grad_output [N, OH, OW, C]; max pooling also reads the input.
void pool2d_backward_reference(const Tensor& input, const Tensor& grad_output, Tensor& grad_input,
                               const Window2D& window, PoolKind kind);

}  // namespace est::ops::cpu
