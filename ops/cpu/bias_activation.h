// The memory-bound pieces around the heavy kernels, shared by every CPU backend: adding a
// per-channel bias, applying an Activation in place, its gradient from the activation's output
// (relu, sigmoid and tanh all have one), and per-channel (column) sums for bias gradients.
// Data is viewed as [rows, channels], the channels last, as in NHWC and dense layers.
#pragma once

#include <cstdint>

#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

// x[r, c] += bias[c] in place. x: [rows, C], bias: [C].
void add_bias_inplace(Tensor& x, const Tensor& bias);

// x = activation(x) in place.
void activate_inplace(Tensor& x, Activation activation);

// grad_input = grad_output * activation'(.), written from the activation's output y.
// All three have y's shape; grad_input may be a fresh tensor or alias grad_output's storage.
void activation_backward(const Tensor& grad_output, const Tensor& y, Tensor& grad_input,
                         Activation activation);

// out[c] = sum_r x[r, c]. x: [rows, C] (any shape whose last axis is C), out: [C].
void column_sums(const Tensor& x, Tensor& out);

// out[j] = sum_b x[b, j] over the leading axis of a [batch, rest] buffer (batch-broadcast
// gradients). out holds `rest` elements.
void sum_leading(const Tensor& x, int64_t batch, Tensor& out);

}  // namespace est::ops::cpu
