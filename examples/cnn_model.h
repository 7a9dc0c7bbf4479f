// The CNN of TensorFlow's Estimator multi-worker tutorial, shared by the example and the
// benchmark: conv2d 32 3x3 relu, max pool 2, flatten, dense 64 relu, dense 10.
#pragma once

#include <est/nn/nn.h>

namespace examples {

// images: float32 [N, 28, 28, 1] -> logits [N, 10].
inline est::Tensor tutorial_cnn(est::ModelContext& ctx, const est::Tensor& images) {
  using namespace est::nn;
  est::Tensor x = conv2d(ctx, images, {.filters = 32, .kernel = 3, .activation = relu});
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 64, .activation = relu});
  return dense(ctx, x, {.units = 10});
}

}  // namespace examples
