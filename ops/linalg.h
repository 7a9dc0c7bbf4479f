// Matrix products and the fused dense layer (x @ kernel + bias, then an activation), the shape
// oneDNN's matmul / inner product runs fastest.
#pragma once

#include "ops/op_enums.h"
#include "ops/tensor.h"

namespace est::ops {

// Activation (ops/op_enums.h): kNone, kRelu, kSigmoid, kTanh, fused after the bias.

// [..., M, K] @ [..., K, N]; batch dimensions must match (or one side has rank 2).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// x: [N, in], kernel: [in, out], bias: [out] or undefined. Returns activation(x @ kernel + bias).
Tensor linear(const Tensor& x, const Tensor& kernel, const Tensor& bias,
              Activation activation = Activation::kNone);

// x: [..., C] + bias: [C].
Tensor bias_add(const Tensor& x, const Tensor& bias);

// Applies an Activation as an op of its own (kNone returns x).
Tensor activate(const Tensor& x, Activation activation);

}  // namespace est::ops
