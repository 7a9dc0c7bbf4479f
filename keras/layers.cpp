// The Keras layers: shapes, weights and calls onto est's nn/ kernels (see layers.h). The Layer
// base (names, the functional graph's nodes, Input) is in layer_base.cpp.
#include "keras/layers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "nn/functions.h"
#include "nn/layers_dense.h"
#include "nn/layers_dropout.h"
#include "nn/layers_embedding.h"
#include "nn/layers_norm.h"
#include "ops/array_ops.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::keras {

namespace {

std::string incompatible(const Layer& layer, const std::string& expected, const Shape& got) {
  return fmt::format(
      "Input 0 of layer \"{}\" is incompatible with the layer: expected {}, found ndim={}. Full "
      "shape received: {}",
      layer.name(), expected, got.size(), shape_tuple(got));
}

void check_rank(const Layer& layer, const Shape& shape, size_t rank, bool min = false) {
  if (min ? shape.size() < rank : shape.size() != rank)
    throw InvalidArgumentError(
        incompatible(layer, fmt::format("{}ndim={}", min ? "min_" : "", rank), shape));
}

nn::Activation activation(const std::string& name) {
  if (name.empty() || name == "linear") return {};
  if (name == "relu") return nn::relu;
  if (name == "sigmoid") return nn::sigmoid;
  if (name == "tanh") return nn::tanh;
  if (name == "softmax") return nn::softmax;
  throw InvalidArgumentError(fmt::format(
      "Unknown activation function: '{}'; use one of 'relu', 'sigmoid', 'tanh', 'softmax', "
      "'linear'",
      name));
}

ops::Padding padding(const std::string& name) {
  if (name == "valid") return ops::Padding::kValid;
  if (name == "same") return ops::Padding::kSame;
  throw InvalidArgumentError(
      fmt::format("padding must be \"valid\" or \"same\", got \"{}\"", name));
}

int64_t window_output(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                      const std::string& pad) {
  if (in < 0) return -1;
  if (padding(pad) == ops::Padding::kSame) return (in + stride - 1) / stride;
  int64_t span = dilation * (window - 1) + 1;
  return in < span ? 0 : (in - span) / stride + 1;
}

// JSON for the configs: [3, 3], "relu", true.
std::string json_size(const nn::Size2& size) { return fmt::format("[{}, {}]", size.h, size.w); }
std::string json_bool(bool value) { return value ? "true" : "false"; }
std::string json_string(const std::string& value) {
  return "\"" + (value.empty() ? std::string("linear") : value) + "\"";
}

// A layer configured by an options struct with a `name` field.
template <class Options>
class ConfiguredLayer : public Layer {
 protected:
  ConfiguredLayer(std::string class_name, Options options)
      : Layer(std::move(class_name), options.name), options_(std::move(options)) {}
  Options options_;
};

class ReshapeLayer : public Layer {
 public:
  ReshapeLayer(Shape target, const std::string& name)
      : Layer("Reshape", name), target_(std::move(target)) {}
  std::string config_json() const override {
    return fmt::format("{{\"target_shape\": [{}]}}", fmt::join(target_, ", "));
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    int64_t count = ops::num_elements(Shape(inputs[0].begin() + 1, inputs[0].end()));
    int64_t known = 1;
    int unknown = -1;
    for (size_t i = 0; i < target_.size(); ++i) {
      if (target_[i] == -1 && unknown < 0)
        unknown = static_cast<int>(i);
      else
        known *= target_[i];
    }
    Shape out{-1};
    out.insert(out.end(), target_.begin(), target_.end());
    if (unknown >= 0 && known > 0) out[unknown + 1] = count / known;
    if ((unknown >= 0 && (known == 0 || count % known != 0)) || (unknown < 0 && known != count))
      throw InvalidArgumentError(fmt::format(
          "Reshape \"{}\": total size of new array must be unchanged, input_shape = {}, "
          "output_shape = {}",
          name(), shape_tuple(Shape(inputs[0].begin() + 1, inputs[0].end())),
          shape_tuple(target_)));
    return out;
  }
  Tensor call(nn::ModelContext&, const std::vector<Tensor>& inputs) const override {
    Shape shape = output_shape({[&] {
      Shape s = inputs[0].shape();
      s[0] = -1;
      return s;
    }()});
    shape[0] = inputs[0].shape()[0];
    return ops::reshape(inputs[0], shape);
  }

 private:
  Shape target_;
};

class DenseLayer : public ConfiguredLayer<layers::DenseOptions> {
 public:
  explicit DenseLayer(layers::DenseOptions options) : ConfiguredLayer("Dense", std::move(options)) {
    activation(options_.activation);  // unknown names fail here
  }
  std::string config_json() const override {
    return fmt::format(R"({{"units": {}, "activation": {}, "use_bias": {}}})", options_.units,
                       json_string(options_.activation), json_bool(options_.use_bias));
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    check_rank(*this, inputs[0], 2, true);
    Shape out = inputs[0];
    out.back() = options_.units;
    return out;
  }
  std::vector<WeightSpec> weights(const std::vector<Shape>& inputs) const override {
    std::vector<WeightSpec> w{{"kernel", {inputs[0].back(), options_.units}}};
    if (options_.use_bias) w.push_back({"bias", {options_.units}});
    return w;
  }
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    return nn::dense(ctx, inputs[0],
                     {.units = options_.units,
                      .activation = activation(options_.activation),
                      .use_bias = options_.use_bias,
                      .name = name()});
  }
  std::vector<Tensor> regularization_losses(nn::ModelContext& ctx,
                                            const std::vector<Shape>& inputs) const override {
    std::vector<Tensor> out;
    auto specs = weights(inputs);
    for (const auto& spec : specs) {
      const auto& regularizer =
          spec.name == "kernel" ? options_.kernel_regularizer : options_.bias_regularizer;
      if (regularizer) out.push_back(penalty(ctx, spec, *regularizer));
    }
    return out;
  }
  std::map<std::string, Regularizer> regularizers() const override {
    std::map<std::string, Regularizer> out;
    if (options_.kernel_regularizer) out["kernel_regularizer"] = *options_.kernel_regularizer;
    if (options_.bias_regularizer) out["bias_regularizer"] = *options_.bias_regularizer;
    return out;
  }

 private:
  // l1 * sum(|w|) + l2 * sum(w^2) of the variable call() made (regularizers.py's L1L2).
  Tensor penalty(nn::ModelContext& ctx, const WeightSpec& spec,
                 const Regularizer& regularizer) const {
    Tensor w =
        ctx.get_variable(name() + "/" + spec.name, spec.shape, ops::DType::kF32, nn::zeros());
    Tensor out;
    if (regularizer.l1 != 0) out = ops::mul(ops::sum(ops::abs(w)), regularizer.l1);
    if (regularizer.l2 != 0) {
      Tensor l2 = ops::mul(ops::sum(ops::square(w)), regularizer.l2);
      out = out.defined() ? ops::add(out, l2) : l2;
    }
    return out.defined() ? out : ops::mul(ops::sum(w), 0.0);
  }
};

class Conv2DLayer : public ConfiguredLayer<layers::Conv2DOptions> {
 public:
  explicit Conv2DLayer(layers::Conv2DOptions options)
      : ConfiguredLayer("Conv2D", std::move(options)) {
    activation(options_.activation);
    padding(options_.padding);
  }
  std::string config_json() const override {
    const auto& o = options_;
    return fmt::format(
        R"({{"filters": {}, "kernel_size": {}, "strides": {}, "padding": "{}", )"
        R"("data_format": "channels_last", "dilation_rate": {}, "groups": 1, "activation": {}, )"
        R"("use_bias": {}}})",
        o.filters, json_size(o.kernel_size), json_size(o.strides), o.padding,
        json_size(o.dilation_rate), json_string(o.activation), json_bool(o.use_bias));
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    check_rank(*this, inputs[0], 4);
    const Shape& in = inputs[0];
    const auto& o = options_;
    return {-1, window_output(in[1], o.kernel_size.h, o.strides.h, o.dilation_rate.h, o.padding),
            window_output(in[2], o.kernel_size.w, o.strides.w, o.dilation_rate.w, o.padding),
            o.filters};
  }
  std::vector<WeightSpec> weights(const std::vector<Shape>& inputs) const override {
    const auto& o = options_;
    std::vector<WeightSpec> w{
        {"kernel", {o.kernel_size.h, o.kernel_size.w, inputs[0][3], o.filters}}};
    if (o.use_bias) w.push_back({"bias", {o.filters}});
    return w;
  }
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    const auto& o = options_;
    return nn::conv2d(ctx, inputs[0],
                      {.filters = o.filters,
                       .kernel = o.kernel_size,
                       .strides = o.strides,
                       .padding = padding(o.padding),
                       .dilation_rate = o.dilation_rate,
                       .activation = activation(o.activation),
                       .use_bias = o.use_bias,
                       .name = name()});
  }
};

class MaxPooling2DLayer : public ConfiguredLayer<layers::Pooling2DOptions> {
 public:
  explicit MaxPooling2DLayer(layers::Pooling2DOptions options)
      : ConfiguredLayer("MaxPooling2D", std::move(options)) {
    if (!options_.strides.is_set()) options_.strides = options_.pool_size;
    padding(options_.padding);
  }
  std::string config_json() const override {
    return fmt::format(
        R"({{"pool_size": {}, "padding": "{}", "strides": {}, "data_format": "channels_last"}})",
        json_size(options_.pool_size), options_.padding, json_size(options_.strides));
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    check_rank(*this, inputs[0], 4);
    const auto& o = options_;
    const Shape& in = inputs[0];
    return {-1, window_output(in[1], o.pool_size.h, o.strides.h, 1, o.padding),
            window_output(in[2], o.pool_size.w, o.strides.w, 1, o.padding), in[3]};
  }
  Tensor call(nn::ModelContext&, const std::vector<Tensor>& inputs) const override {
    return nn::max_pooling2d(inputs[0], options_.pool_size, options_.strides,
                             padding(options_.padding));
  }
};

class FlattenLayer : public Layer {
 public:
  explicit FlattenLayer(const std::string& name) : Layer("Flatten", name) {}
  std::string config_json() const override { return R"({"data_format": "channels_last"})"; }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    check_rank(*this, inputs[0], 2, true);
    return {-1, ops::num_elements(Shape(inputs[0].begin() + 1, inputs[0].end()))};
  }
  Tensor call(nn::ModelContext&, const std::vector<Tensor>& inputs) const override {
    return ops::flatten(inputs[0]);
  }
};

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(layers::DropoutOptions options)
      : Layer("Dropout", options.name), rate_(options.rate) {
    if (rate_ < 0 || rate_ >= 1)
      throw InvalidArgumentError(
          fmt::format("Dropout \"{}\": rate must be in [0, 1), got {}", name(), rate_));
  }
  std::string config_json() const override {
    return fmt::format(R"({{"rate": {}, "seed": null, "noise_shape": null}})", rate_);
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override { return inputs[0]; }
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    return nn::dropout(ctx, inputs[0], rate_);
  }

 private:
  double rate_;
};

class BatchNormalizationLayer : public ConfiguredLayer<layers::BatchNormalizationOptions> {
 public:
  explicit BatchNormalizationLayer(layers::BatchNormalizationOptions options)
      : ConfiguredLayer("BatchNormalization", std::move(options)) {}
  std::string config_json() const override {
    return fmt::format(
        R"({{"axis": -1, "momentum": {}, "epsilon": {}, "center": {}, "scale": {}}})",
        options_.momentum, options_.epsilon, json_bool(options_.center), json_bool(options_.scale));
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override { return inputs[0]; }
  std::vector<WeightSpec> weights(const std::vector<Shape>& inputs) const override {
    Shape c{inputs[0].back()};
    std::vector<WeightSpec> w;
    if (options_.scale) w.push_back({"gamma", c});
    if (options_.center) w.push_back({"beta", c});
    w.push_back({"moving_mean", c, false});
    w.push_back({"moving_variance", c, false});
    return w;
  }
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    return nn::batch_normalization(ctx, inputs[0],
                                   {.momentum = options_.momentum,
                                    .epsilon = options_.epsilon,
                                    .center = options_.center,
                                    .scale = options_.scale,
                                    .name = name()});
  }
};

class EmbeddingLayer : public ConfiguredLayer<layers::EmbeddingOptions> {
 public:
  explicit EmbeddingLayer(layers::EmbeddingOptions options)
      : ConfiguredLayer("Embedding", std::move(options)) {}
  std::string config_json() const override {
    return fmt::format(R"({{"input_dim": {}, "output_dim": {}}})", options_.input_dim,
                       options_.output_dim);
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    Shape out = inputs[0];
    out.push_back(options_.output_dim);
    return out;
  }
  std::vector<WeightSpec> weights(const std::vector<Shape>&) const override {
    return {{"embeddings", {options_.input_dim, options_.output_dim}}};
  }
  Tensor call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    Tensor ids = inputs[0];
    if (ids.dtype() != ops::DType::kI32 && ids.dtype() != ops::DType::kI64)
      ids = ops::cast(ids, ops::DType::kI32);  // Keras casts float ids to int32
    return nn::embedding(
        ctx, ids,
        {.input_dim = options_.input_dim, .output_dim = options_.output_dim, .name = name()});
  }
};

// Concatenate (axis) and Add (axis ignored): several inputs of matching shapes.
class MergeLayer : public Layer {
 public:
  MergeLayer(std::string class_name, const std::string& name, int axis)
      : Layer(std::move(class_name), name), axis_(axis) {}
  std::string config_json() const override {
    return class_name() == "Concatenate" ? fmt::format(R"({{"axis": {}}})", axis_) : "{}";
  }
  int arity() const override { return -1; }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    if (inputs.size() < 2)
      throw InvalidArgumentError(fmt::format(
          "A `{}` layer (\"{}\") should be called on a list of at least 2 inputs. Received: "
          "input_shape={}",
          class_name(), name(), inputs.empty() ? "()" : shape_tuple(inputs[0])));
    Shape out = inputs[0];
    bool concat = class_name() == "Concatenate";
    size_t axis = axis_ < 0 ? out.size() + axis_ : axis_;
    for (size_t i = 1; i < inputs.size(); ++i) {
      bool ok = inputs[i].size() == out.size();
      for (size_t d = 0; ok && d < out.size(); ++d)
        ok = (concat && d == axis) || inputs[i][d] == out[d];
      if (!ok)
        throw InvalidArgumentError(
            fmt::format("A `{}` layer (\"{}\") requires inputs with matching shapes{}. Received: "
                        "input_shape=[{}, {}]",
                        class_name(), name(), concat ? " except for the concatenation axis" : "",
                        shape_tuple(inputs[0]), shape_tuple(inputs[i])));
      if (concat) out[axis] += inputs[i][axis];
    }
    return out;
  }
  Tensor call(nn::ModelContext&, const std::vector<Tensor>& inputs) const override {
    if (class_name() == "Concatenate") return ops::concat(inputs, axis_);
    Tensor sum = inputs[0];
    for (size_t i = 1; i < inputs.size(); ++i) sum = ops::add(sum, inputs[i]);
    return sum;
  }

 private:
  int axis_;
};

}  // namespace

namespace layers {

LayerPtr InputLayer(InputOptions options) {
  return std::make_shared<InputLayerImpl>(std::move(options));
}
LayerPtr Reshape(Shape target_shape, std::string name) {
  return std::make_shared<ReshapeLayer>(std::move(target_shape), name);
}
LayerPtr Dense(DenseOptions options) { return std::make_shared<DenseLayer>(std::move(options)); }
LayerPtr Conv2D(Conv2DOptions options) { return std::make_shared<Conv2DLayer>(std::move(options)); }
LayerPtr MaxPooling2D(Pooling2DOptions options) {
  return std::make_shared<MaxPooling2DLayer>(std::move(options));
}
LayerPtr Flatten(std::string name) { return std::make_shared<FlattenLayer>(name); }
LayerPtr Dropout(DropoutOptions options) {
  return std::make_shared<DropoutLayer>(std::move(options));
}
LayerPtr BatchNormalization(BatchNormalizationOptions options) {
  return std::make_shared<BatchNormalizationLayer>(std::move(options));
}
LayerPtr Embedding(EmbeddingOptions options) {
  return std::make_shared<EmbeddingLayer>(std::move(options));
}
LayerPtr Concatenate(int axis, std::string name) {
  return std::make_shared<MergeLayer>("Concatenate", name, axis);
}
LayerPtr Add(std::string name) { return std::make_shared<MergeLayer>("Add", name, -1); }

}  // namespace layers

}  // namespace est::keras
