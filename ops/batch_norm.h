// Batch normalization over every axis but the last (channels), as tf.nn.fused_batch_norm with
// NHWC data or a dense layer's [N, C] output.
#pragma once

#include "ops/tensor.h"

namespace est::ops {

struct BatchNormOutput {
  Tensor output;         // same shape as x
  Tensor batch_mean;     // [C], no gradient
  Tensor batch_variance; // [C], biased (divided by the count), no gradient
};

// Normalizes with the batch's own statistics; gradients to x, gamma and beta.
BatchNormOutput batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon);
// Normalizes with given statistics (moving averages); gradients to x, gamma and beta.
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon);

}  // namespace est::ops
