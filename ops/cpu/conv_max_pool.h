// A float32 convolution with few input channels, its bias and activation, and the max pooling
// that follows it, computed together (ops/conv_pool.h): each pooling window's convolution
// outputs are computed in registers, activated and reduced to their maximum, so the
// convolution's output [N, OH, OW, OC] (the largest tensor of a small image model) is never
// written. Training keeps one byte per pooled value, the window position of its maximum, from
// which the kernel gradient rebuilds the convolution's output gradient a block of rows at a time
// in cache (conv_kernel_gradient.h). Deterministic: each output is computed in one fixed order,
// and the gradient's parts are fixed by the shape.
#pragma once

#include <cstdint>

#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

// Max pooling with a window of pool_h x pool_w and the same strides, no padding (so the pooled
// size is the floor of the convolution's over the window), after the convolution `conv`.
struct MaxPoolAfterConv {
  int64_t pool_h = 0, pool_w = 0;
  int64_t out_h = 0, out_w = 0;  // pooled [N, out_h, out_w, conv.out_c]
};

// Whether the fused kernels handle this geometry: what conv2d_kernel_gradient_fused handles (a
// patch KH * KW * C_in of at most 64 values, a multiple of 16 output channels up to 256, output
// rows of at most 256), a pooling window of at most 64 positions and activation none or relu.
bool conv_max_pool_supported(const Window2D& conv, const MaxPoolAfterConv& pool,
                             Activation activation);

// pooled [N, out_h, out_w, OC] = max over each window of activation(conv2d(input, kernel) + bias)
// from input [N, H, W, C_in], kernel [KH, KW, C_in, OC] and bias [OC] (or null). When `argmax`
// is not null (uint8, the shape of pooled) it receives the position dy * pool_w + dx of each
// maximum in its window, the first in row-major order among equal values (as max_pool2d's
// gradient takes it).
void conv_max_pool_forward(const Tensor& input, const Tensor& kernel, const Tensor* bias,
                           Activation activation, const Window2D& conv,
                           const MaxPoolAfterConv& pool, Tensor& pooled, Tensor* argmax);

// grad_kernel [KH, KW, C_in, OC] and, when not null, grad_bias [OC], from input, the gradient of
// the pooled output grad_pooled, and pooled and argmax from conv_max_pool_forward: the
// convolution's output gradient (the pooled gradient at each window's maximum, times the
// activation's gradient there, zero elsewhere) is rebuilt block by block in cache and reduced
// as conv2d_kernel_gradient_fused does (defined in conv_kernel_gradient.cpp).
void conv_max_pool_kernel_gradient(const Tensor& input, const Tensor& grad_pooled,
                                   const Tensor& pooled, const Tensor& argmax,
                                   Activation activation, const Window2D& conv,
                                   const MaxPoolAfterConv& pool, Tensor& grad_kernel,
                                   Tensor* grad_bias);

}  // namespace est::ops::cpu
