// Softmax, the fused cross-entropies and dropout. The cross-entropies are computed from logits
// in one numerically stable pass (log-sum-exp with the max subtracted) and return one loss per
// example; reductions over the batch are the caller's (nn/losses.h).
#pragma once

#include "ops/random.h"
#include "ops/tensor.h"

namespace est::ops {

Tensor softmax(const Tensor& logits, int axis = -1);
Tensor log_softmax(const Tensor& logits, int axis = -1);

// labels: int32/int64 class ids [N]; logits: [N, C]. Returns [N]. An id outside [0, C) is an
// InvalidArgumentError naming the id, its position and C.
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// labels: probabilities [N, C] (same dtype as logits). Returns [N]. Gradients to both.
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// Elementwise max(x, 0) - x * z + log(1 + exp(-|x|)), as tf.nn.sigmoid_cross_entropy_with_logits.
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

// Zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate).
// rate in [0, 1); rate 0 returns x itself.
Tensor dropout(const Tensor& x, double rate, Generator& generator);

}  // namespace est::ops
