// Sequential and the layer structs: each forwards to its functional layer.
#include "nn/sequential.h"

#include <optional>

#include "nn/layers_dropout.h"
#include "ops/array_ops.h"

namespace est::nn {

Tensor Dense::operator()(ModelContext& ctx, const Tensor& x) const {
  return dense(ctx, x, options);
}

Tensor Conv2D::operator()(ModelContext& ctx, const Tensor& x) const {
  return conv2d(ctx, x, options);
}

Tensor MaxPooling2D::operator()(ModelContext&, const Tensor& x) const {
  return max_pooling2d(x, pool_size, strides, padding);
}

Tensor AveragePooling2D::operator()(ModelContext&, const Tensor& x) const {
  return average_pooling2d(x, pool_size, strides, padding);
}

Tensor Flatten::operator()(ModelContext&, const Tensor& x) const { return ops::flatten(x); }

Tensor Dropout::operator()(ModelContext& ctx, const Tensor& x) const {
  return dropout(ctx, x, rate);
}

Tensor BatchNormalization::operator()(ModelContext& ctx, const Tensor& x) const {
  return batch_normalization(ctx, x, options);
}

Tensor Embedding::operator()(ModelContext& ctx, const Tensor& x) const {
  return embedding(ctx, x, options);
}

Tensor Lambda::operator()(ModelContext&, const Tensor& x) const {
  if (!function) throw InvalidArgumentError("Lambda layer: no function was given");
  return function(x);
}

Sequential::Sequential(std::initializer_list<Layer> layers, std::string name)
    : layers_(layers), name_(std::move(name)) {}

Sequential& Sequential::add(Layer layer) {
  layers_.push_back(std::move(layer));
  return *this;
}

Tensor Sequential::operator()(ModelContext& ctx, const Tensor& x) const {
  if (layers_.empty())
    throw InvalidArgumentError("Sequential" + (name_.empty() ? "" : " '" + name_ + "'") +
                               ": the model has no layers; pass them to the constructor or add()");
  std::optional<VariableScope> scope;
  if (!name_.empty()) scope.emplace(ctx.variable_scope(name_));
  Tensor y = x;
  for (const Layer& layer : layers_) y = layer(ctx, y);
  return y;
}

}  // namespace est::nn
