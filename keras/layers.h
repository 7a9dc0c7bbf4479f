// Keras layers (tf.keras.layers, Keras 2.x: keras/engine/base_layer.py,
// keras/engine/input_layer.py, keras/layers/core/*.py, keras/layers/convolutional/conv2d.py,
// keras/layers/pooling/, keras/layers/reshaping/) as objects that know their shapes and weights
// ahead of a call, so that a model can print its summary, check its inputs and name its variables
// before it runs.
//
// A layer is an object (held by LayerPtr) with a name fixed at construction: the snake-case class
// name made unique across the process as backend.unique_object_name does (`dense`, `dense_1`,
// ...; `input_1`, `input_2` for inputs; clear_session() starts again). Its variables are
// `<name>/<weight>` (`conv2d/kernel`, `dense_1/bias`): call() runs est's nn/ kernels with the
// layer's name as the explicit variable name, so a Keras model and a model_fn written with
// nn::dense(ctx, x, {.name = "dense"}) share checkpoints. Defaults are Keras's: glorot_uniform
// kernels, zeros biases, padding "valid", channels_last (NHWC, HWIO kernels).
//
// Functional API: Input({28, 28}) returns a KerasTensor (a symbolic tensor: its shape with
// batch -1, and the node that makes it); calling a layer on KerasTensors adds a node.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/layers_conv.h"
#include "nn/model_context.h"
#include "ops/tensor.h"

namespace est::keras {

using ops::Shape;
using ops::Tensor;

class Layer;
using LayerPtr = std::shared_ptr<Layer>;
struct Node;

// A symbolic tensor of the functional API: dims with -1 for the batch ("None").
struct KerasTensor {
  std::shared_ptr<const Node> node;
  Shape shape;
};

// One call of a layer in a graph: the layer, the tensors it was called on, its output shape.
struct Node {
  LayerPtr layer;
  std::vector<KerasTensor> inputs;
  Shape output_shape;
};

// A weight the layer creates for given input shapes: its name within the layer ("kernel").
struct WeightSpec {
  std::string name;
  Shape shape;
  bool trainable = true;
};

// The process-wide name counters (keras.backend.unique_object_name): "dense", then "dense_1"
// (zero_based), or "input_1" first (not zero_based).
std::string unique_object_name(const std::string& base, bool zero_based = true);
// "MaxPooling2D" -> "max_pooling2d" (generic_utils.to_snake_case).
std::string snake_case(const std::string& name);
// keras.backend.clear_session(): the counters start again.
void clear_session();
// "(None, 26, 26, 32)", as Python prints a shape tuple ("(None,)" for one dimension).
std::string shape_tuple(const Shape& shape);

// keras.regularizers.L1(l1) / L2(l2) / L1L2(l1, l2) (keras/regularizers.py): the penalty
// l1 * sum(|w|) + l2 * sum(w^2) of a weight, added to the model's total loss (and its "loss"
// log) as Keras adds model.losses.
struct Regularizer {
  double l1 = 0.0;
  double l2 = 0.0;
};

class Layer : public std::enable_shared_from_this<Layer> {
 public:
  // `name` empty: unique_object_name(snake_case of class_name).
  Layer(std::string class_name, const std::string& name, bool zero_based = true);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& class_name() const { return class_name_; }

  // The output shape for these input shapes (batch -1); InvalidArgumentError naming the layer
  // and the shape it expected when they do not fit.
  virtual Shape output_shape(const std::vector<Shape>& inputs) const = 0;
  // The weights call() creates for these input shapes, in creation order.
  virtual std::vector<WeightSpec> weights(const std::vector<Shape>& /*inputs*/) const { return {}; }
  // The computation on real tensors (batch first); variables through ctx.
  virtual Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const = 0;
  // Its weights' regularization penalties (scalars; Keras's layer.losses), after call() made
  // its variables in ctx.
  virtual std::vector<Tensor> regularization_losses(nn::ModelContext& /*ctx*/,
                                                    const std::vector<Shape>& /*inputs*/) const {
    return {};
  }
  // Its regularizers as get_config writes them ("kernel_regularizer" -> one), for saving.
  virtual std::map<std::string, Regularizer> regularizers() const { return {}; }
  // How many inputs it takes (-1: two or more).
  virtual int arity() const { return 1; }
  // The class's own fields of Keras's get_config() as a JSON object ("units", "activation",
  // ...), which keras/serialization.cpp completes with the common ones ("name", "dtype", ...).
  virtual std::string config_json() const { return "{}"; }

  // Functional API: a node calling this layer on `x`.
  KerasTensor operator()(const KerasTensor& x);
  KerasTensor operator()(const std::vector<KerasTensor>& xs);

 private:
  std::string class_name_;
  std::string name_;
};

namespace layers {

struct InputOptions {
  Shape shape;  // without the batch dimension (Keras's input_shape)
  ops::DType dtype = ops::DType::kF32;
  std::string name;  // empty: input_1, input_2, ...
};
// The layer behind InputLayer() and Input(): no weights, the identity on a batch whose shape
// (after the batch) is options.shape.
class InputLayerImpl : public Layer {
 public:
  explicit InputLayerImpl(InputOptions options);
  const InputOptions& options() const { return options_; }
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override;
  int arity() const override { return 0; }

 private:
  InputOptions options_;
};
// keras.layers.InputLayer(input_shape=...), the first layer of a Sequential.
LayerPtr InputLayer(InputOptions options);

// keras.layers.Reshape(target_shape): one dimension may be -1.
LayerPtr Reshape(Shape target_shape, std::string name = {});

struct DenseOptions {
  int64_t units = 0;
  std::string activation;  // "relu", "sigmoid", "tanh", "softmax"; empty or "linear": none
  bool use_bias = true;
  std::string name;
  std::optional<Regularizer> kernel_regularizer;
  std::optional<Regularizer> bias_regularizer;
};
LayerPtr Dense(DenseOptions options);

struct Conv2DOptions {
  int64_t filters = 0;
  nn::Size2 kernel_size;
  nn::Size2 strides = 1;
  std::string padding = "valid";  // or "same"
  nn::Size2 dilation_rate = 1;
  std::string activation;
  bool use_bias = true;
  std::string name;
};
LayerPtr Conv2D(Conv2DOptions options);

struct Pooling2DOptions {
  nn::Size2 pool_size = 2;
  nn::Size2 strides;  // unset: pool_size
  std::string padding = "valid";
  std::string name;
};
LayerPtr MaxPooling2D(Pooling2DOptions options = {});

LayerPtr Flatten(std::string name = {});

struct DropoutOptions {
  double rate = 0.5;
  std::string name;
};
LayerPtr Dropout(DropoutOptions options);

struct BatchNormalizationOptions {
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  std::string name;
};
LayerPtr BatchNormalization(BatchNormalizationOptions options = {});

struct EmbeddingOptions {
  int64_t input_dim = 0;
  int64_t output_dim = 0;
  std::string name;
};
LayerPtr Embedding(EmbeddingOptions options);

// keras.layers.Concatenate(axis=-1) and Add(): several inputs.
LayerPtr Concatenate(int axis = -1, std::string name = {});
LayerPtr Add(std::string name = {});

}  // namespace layers

// keras.Input(shape): a KerasTensor made by a new InputLayer.
KerasTensor Input(Shape shape, std::string name = {}, ops::DType dtype = ops::DType::kF32);

}  // namespace est::keras
