// The Eigen reference convolution (NHWC input, HWIO kernel): im2col + one GEMM per chunk of
// images, float32 and float64. Bias and activation are applied by the caller (conv.cpp), so
// these three functions are the plain convolution and its two gradients.
#pragma once

#include "ops/cpu/window.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

// output [N, OH, OW, OC] = conv(input [N, H, W, C], kernel [KH, KW, C, OC]).
void conv2d_forward_reference(const Tensor& input, const Tensor& kernel, Tensor& output,
                              const Window2D& window);

// grad_input [N, H, W, C] from grad_output [N, OH, OW, OC] and kernel.
void conv2d_backward_data_reference(const Tensor& grad_output, const Tensor& kernel,
                                    Tensor& grad_input, const Window2D& window);

// grad_kernel [KH, KW, C, OC] from input and grad_output.
void conv2d_backward_kernel_reference(const Tensor& input, const Tensor& grad_output,
                                      Tensor& grad_kernel, const Window2D& window);

}  // namespace est::ops::cpu
