// dropout: active only while training, as keras.layers.Dropout; an identity in eval/predict.
#pragma once

#include "nn/model_context.h"

namespace est::nn {

// Zeroes each element with probability `rate` (in [0, 1)) and scales the others by
// 1 / (1 - rate), drawing from ctx.generator(). Returns x itself unless ctx.is_training().
Tensor dropout(ModelContext& ctx, const Tensor& x, double rate = 0.5);

}  // namespace est::nn
