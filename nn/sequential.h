// Sequential: a Keras-style list of layers run one after the other.
//
//   Sequential model({Conv2D{{.filters = 32, .kernel = 3, .activation = relu}}, MaxPooling2D{2},
//                     Flatten{}, Dense{{.units = 10}}});
//   Tensor logits = model(ctx, x);
//
// The layer structs only hold options; variables are created and found through the context
// at call time (named `conv2d`, `dense`, ... by call order, as the functional layers are), so a
// Sequential built afresh in every model_fn call finds the same variables.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/layers_conv.h"
#include "nn/layers_dense.h"
#include "nn/layers_embedding.h"
#include "nn/layers_norm.h"
#include "nn/model_context.h"

namespace est::nn {

// Anything callable as layer(ctx, x).
class Layer {
 public:
  template <class L>
  requires(std::is_invocable_r_v<Tensor, const L&, ModelContext&, const Tensor&> &&
           !std::is_same_v<std::decay_t<L>, Layer>) Layer(L layer)
      : call_(std::move(layer)) {}  // NOLINT: implicit on purpose
  Tensor operator()(ModelContext& ctx, const Tensor& x) const { return call_(ctx, x); }

 private:
  std::function<Tensor(ModelContext&, const Tensor&)> call_;
};

struct Dense {
  DenseOptions options;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct Conv2D {
  Conv2DOptions options;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct MaxPooling2D {
  Size2 pool_size = 2;
  Size2 strides;  // unset: pool_size
  Padding padding = valid;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct AveragePooling2D {
  Size2 pool_size = 2;
  Size2 strides;  // unset: pool_size
  Padding padding = valid;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct Flatten {
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct Dropout {
  double rate = 0.5;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct BatchNormalization {
  BatchNormOptions options;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

struct Embedding {
  EmbeddingOptions options;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

// Any function of the activations alone (keras.layers.Lambda / Activation).
struct Lambda {
  std::function<Tensor(const Tensor&)> function;
  Tensor operator()(ModelContext& ctx, const Tensor& x) const;
};

class Sequential {
 public:
  Sequential() = default;
  // `name`, when given, is a variable scope around the layers ("encoder/dense/kernel").
  Sequential(std::initializer_list<Layer> layers, std::string name = {});

  Sequential& add(Layer layer);
  size_t size() const { return layers_.size(); }
  const std::string& name() const { return name_; }

  Tensor operator()(ModelContext& ctx, const Tensor& x) const;

 private:
  std::vector<Layer> layers_;
  std::string name_;
};

}  // namespace est::nn
