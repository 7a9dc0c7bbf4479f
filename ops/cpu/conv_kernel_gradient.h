// The kernel gradient of a float32 convolution with few input channels (the first layer of an
// image model: KH * KW * C_in small), fused with its activation's gradient. The generic path
// writes the pre-activation gradient [N, OH, OW, OC] to memory and reads it back in the
// backward-weights primitive; here each block of output rows is masked and reduced while it is
// in cache, so the large gradient tensor is read once. Used by the oneDNN backend when the
// input's own gradient is not needed.
#pragma once

#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

// Whether conv2d_kernel_gradient_fused handles this geometry: a patch (KH * KW * C_in) of at
// most 64 values and a multiple of 16 output channels up to 256.
bool fused_kernel_gradient_supported(const Window2D& window);

// grad_kernel [KH, KW, C_in, OC] and, when not null, grad_bias [OC], from input [N, H, W, C_in],
// the gradient of the activation's output grad_output [N, OH, OW, OC] and that output y (unused,
// and may be undefined, for Activation::kNone). All float32.
void conv2d_kernel_gradient_fused(const Tensor& input, const Tensor& grad_output, const Tensor& y,
                                  Activation activation, const Window2D& window,
                                  Tensor& grad_kernel, Tensor* grad_bias);

}  // namespace est::ops::cpu
