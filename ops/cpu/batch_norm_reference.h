// Reference batch normalization over [rows, C] (every axis but the last folded into rows),
// float32 and float64, with double accumulators. gamma/beta may be undefined (scale 1, shift 0),
// as with Keras' BatchNormalization(scale=False / center=False).
#pragma once

#include "ops/tensor.h"

namespace est::ops::cpu {

// mean, variance: [C], the biased variance (divided by rows).
void batch_norm_statistics_reference(const Tensor& x, Tensor& mean, Tensor& variance);

// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
void batch_norm_forward_reference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& variance, double epsilon,
                                  Tensor& y);

// Gradients of the above. `training`: mean and variance were the batch's own (so they depend on
// x); otherwise they are constants. Null outputs are skipped.
void batch_norm_backward_reference(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& variance, const Tensor& grad_y, double epsilon,
                                   bool training, Tensor* grad_x, Tensor* grad_gamma,
                                   Tensor* grad_beta);

}  // namespace est::ops::cpu
