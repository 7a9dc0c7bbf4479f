// dense: the fully connected layer, as tf.compat.v1.layers.dense / keras.layers.Dense.
#pragma once

#include <string>

#include "nn/activation.h"
#include "nn/initializers.h"
#include "nn/model_context.h"

namespace est::nn {

struct DenseOptions {
  int64_t units = 0;
  Activation activation;
  bool use_bias = true;
  Initializer kernel_initializer = glorot_uniform();
  Initializer bias_initializer = zeros();
  std::string name;  // empty: "dense", "dense_1", ... in call order
  // The layer's dtype policy ("mixed_bfloat16", "float32", ...; nn/mixed_precision.h);
  // empty: the global policy.
  std::string dtype;
};

// x: [N, in] (or [..., in], applied to the last axis). Variables `<name>/kernel` [in, units]
// and `<name>/bias` [units], of x's dtype, or under a mixed policy of its variable dtype and
// read as its compute dtype, in which x is cast and the result computed (mixed_precision.h).
// Returns [N, units] (or [..., units]).
Tensor dense(ModelContext& ctx, const Tensor& x, const DenseOptions& options);

}  // namespace est::nn
