// A convolution followed by a max pooling, computed without writing the convolution's output:
// on the CPU, for float32 convolutions with few input channels (the first layer of an image
// model) and a pooling whose strides equal its window, ops/cpu/conv_max_pool.h computes each
// window's outputs in registers and keeps one byte per pooled value for the gradient. On a
// 28x28 image with 32 filters the skipped output is 4x the pooled one, and the largest tensor
// of such a model.
//
// Two ways in. conv2d_max_pool2d is the explicit op. The layers (nn::conv2d, then
// nn::max_pooling2d) are separate calls, so conv2d_deferred returns a convolution output that is
// computed only when something reads it (ops/deferred_fill.h), and max_pool2d_after pools such
// an output straight from the convolution's arguments; anything else that reads it computes it
// as conv2d would. Results equal conv2d then max_pool2d up to float rounding (the sums run in
// another order); kernel and bias gradients likewise.
//
// EST_CONV_POOL_FUSION=0 (or set_conv_pool_fusion(false)) turns the fusion off, for A/B
// comparisons; a BackendGuard (ops/backend.h) does too on its thread, so that a forced backend
// runs every op itself.
#pragma once

#include "ops/conv.h"

namespace est::ops {

// max_pool2d(conv2d(input, kernel, bias, conv), pool), fused when it applies: CPU float32
// tensors, input needing no gradient, conv.activation none or relu, a patch KH * KW * C_in of at
// most 64 values, a multiple of 16 filters up to 256, pool strides equal to the window, valid
// pooling. Otherwise it runs the two ops.
Tensor conv2d_max_pool2d(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                         const Conv2DParams& conv, const Pool2DParams& pool);

// conv2d(input, kernel, bias, params), its output computed when first read unless
// max_pool2d_after pools it first. Computed at once where the fusion cannot apply to it (see
// conv2d_max_pool2d; the input needing a gradient, another device or dtype, fusion off). The
// deferred computation uses copies of input, kernel and bias taken now, so later in-place
// updates (an optimizer step) do not change it.
Tensor conv2d_deferred(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                       const Conv2DParams& params);

// max_pool2d(x, pool); when x is a pending output of conv2d_deferred and the pooling is one the
// fused kernel handles, from the convolution's arguments without computing x.
Tensor max_pool2d_after(const Tensor& x, const Pool2DParams& pool);

// Whether the fusion may run (EST_CONV_POOL_FUSION, not "0" by default); set overrides.
bool conv_pool_fusion_enabled();
void set_conv_pool_fusion(bool on);

}  // namespace est::ops
