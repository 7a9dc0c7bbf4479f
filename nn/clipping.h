// Clipping by global norm, as tf.clip_by_global_norm: every tensor is scaled by
// clip_norm / max(global_norm, clip_norm), so the direction of the whole update is kept.
#pragma once

#include <vector>

#include "ops/tensor.h"

namespace est::nn::optim {

// sqrt(sum of squares of every element of every tensor); undefined tensors are skipped.
double global_norm(const std::vector<Tensor>& tensors);

struct ClippedTensors {
  std::vector<Tensor> tensors;  // undefined inputs stay undefined
  double global_norm = 0.0;     // before clipping
};

// A non-finite global norm makes every output NaN, as TensorFlow does, so a NaN check sees it.
ClippedTensors clip_by_global_norm(const std::vector<Tensor>& tensors, double clip_norm);

}  // namespace est::nn::optim
