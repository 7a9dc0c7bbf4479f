// Model configs as Keras writes and reads them (see serialization.h). Followed:
// keras/src/saving/serialization_lib.py (serialize_keras_object), keras/src/models/
// sequential.py and functional.py (get_config, functional_from_config), layer get_config in
// keras/src/layers/; Keras 2.x keras/engine/functional.py, sequential.py, input_layer.py.
#include "keras/serialization.h"

#include <fmt/format.h>

#include <functional>
#include <map>

#include "ops/error.h"

namespace est::keras {
namespace {

Json shape_json(const Shape& shape) {
  Json out = Json::array();
  for (int64_t d : shape) out.push_back(d < 0 ? Json(nullptr) : Json(d));
  return out;
}

std::string keras_dtype_name(ops::DType dtype) {
  switch (dtype) {
    case ops::DType::kI32:
      return "int32";
    case ops::DType::kI64:
      return "int64";
    case ops::DType::kF64:
      return "float64";
    default:
      return "float32";
  }
}

// A Keras object of `module` as serialize_keras_object writes it (Keras 3: with its module).
Json keras_object(const char* module, const std::string& class_name, Json config,
                  KerasVersion version) {
  Json out;
  if (version == KerasVersion::k3) out["module"] = module;
  out["class_name"] = class_name;
  out["config"] = std::move(config);
  if (version == KerasVersion::k3) out["registered_name"] = nullptr;
  return out;
}

Json initializer(const std::string& class_name, Json config, KerasVersion version) {
  return keras_object("keras.initializers", class_name, std::move(config), version);
}

// regularizers.py's L1, L2 or L1L2, by which factors are set.
Json regularizer(const Regularizer& r, KerasVersion version) {
  if (r.l1 != 0 && r.l2 == 0)
    return keras_object("keras.regularizers", "L1", {{"l1", r.l1}}, version);
  if (r.l1 == 0) return keras_object("keras.regularizers", "L2", {{"l2", r.l2}}, version);
  return keras_object("keras.regularizers", "L1L2", {{"l1", r.l1}, {"l2", r.l2}}, version);
}

std::optional<Regularizer> regularizer_from(const Json& c, const char* key,
                                            const std::string& where) {
  if (!c.contains(key) || c[key].is_null()) return std::nullopt;
  const Json& r = c[key];
  std::string class_name = r.is_object() ? r.value("class_name", "") : "";
  Json config = r.is_object() ? r.value("config", Json::object()) : Json::object();
  if (class_name != "L1" && class_name != "L2" && class_name != "L1L2")
    throw InvalidArgumentError(fmt::format(
        "{}: {} {} is not a regularizer est::keras has (L1, L2, L1L2)", where, key, r.dump()));
  return Regularizer{.l1 = config.value("l1", 0.0), .l2 = config.value("l2", 0.0)};
}

// The layer's get_config(): the common fields, its own, and (Dense, Conv2D, Embedding) its
// initializers, regularizers and constraints.
Json layer_config(const Layer& layer, const Shape& batch_input_shape, KerasVersion version) {
  Json config;
  if (const auto* input = dynamic_cast<const layers::InputLayerImpl*>(&layer)) {
    config[version == KerasVersion::k3 ? "batch_shape" : "batch_input_shape"] =
        shape_json(batch_input_shape);
    config["dtype"] = keras_dtype_name(input->options().dtype);
    config["sparse"] = false;
    config["ragged"] = false;
    config["name"] = layer.name();
    return config;
  }
  config["name"] = layer.name();
  config["trainable"] = true;
  if (version == KerasVersion::k3)
    config["dtype"] = Json{{"module", "keras"},
                           {"class_name", "DTypePolicy"},
                           {"config", {{"name", "float32"}}},
                           {"registered_name", nullptr}};
  else
    config["dtype"] = "float32";
  const Json own = Json::parse(layer.config_json());
  for (const auto& [key, value] : own.items()) config[key] = value;
  const std::string& cls = layer.class_name();
  if (cls == "Dense" || cls == "Conv2D") {
    config["kernel_initializer"] = initializer("GlorotUniform", {{"seed", nullptr}}, version);
    config["bias_initializer"] = initializer("Zeros", Json::object(), version);
    config["kernel_regularizer"] = nullptr;
    config["bias_regularizer"] = nullptr;
    for (const auto& [key, r] : layer.regularizers()) config[key] = regularizer(r, version);
    if (version == KerasVersion::k2) config["activity_regularizer"] = nullptr;  // not in Keras 3
    config["kernel_constraint"] = nullptr;
    config["bias_constraint"] = nullptr;
  }
  if (cls == "Embedding") {
    config["embeddings_initializer"] = initializer(
        "RandomUniform", {{"minval", -0.05}, {"maxval", 0.05}, {"seed", nullptr}}, version);
    for (const char* key :
         {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint"})
      config[key] = nullptr;
    config["mask_zero"] = false;
  }
  return config;
}

Json history(const KerasTensor& x, KerasVersion version) {
  Json entry{x.node->layer->name(), 0, 0};
  if (version == KerasVersion::k2) entry.push_back(Json::object());
  return entry;
}

Json inbound_nodes(const Node& node, KerasVersion version) {
  if (node.inputs.empty()) return Json::array();
  if (version == KerasVersion::k2) {
    Json call = Json::array();
    for (const auto& x : node.inputs) call.push_back(history(x, version));
    return Json::array({call});
  }
  Json tensors = Json::array();
  for (const auto& x : node.inputs)
    tensors.push_back({{"class_name", "__keras_tensor__"},
                       {"config",
                        {{"shape", shape_json(x.shape)},
                         {"dtype", "float32"},
                         {"keras_history", history(x, version)}}}});
  Json args = node.inputs.size() == 1 ? Json::array({tensors[0]}) : Json::array({tensors});
  return Json::array({{{"args", args}, {"kwargs", Json::object()}}});
}

// Nodes of the model graph by layer (each layer is called once).
std::map<const Layer*, const Node*> nodes_by_layer(const Model& model) {
  std::map<const Layer*, const Node*> out;
  std::vector<const Node*> stack;
  for (const auto& output : model.outputs()) stack.push_back(output.node.get());
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    if (out.count(node->layer.get())) continue;
    out[node->layer.get()] = node;
    for (const auto& x : node->inputs) stack.push_back(x.node.get());
  }
  return out;
}

Shape shape_from(const Json& json, const std::string& where) {
  if (!json.is_array()) throw DataLossError(where + ": a shape is not a list");
  Shape out;
  for (const Json& d : json) out.push_back(d.is_null() ? -1 : d.get<int64_t>());
  return out;
}

nn::Size2 size2(const Json& json) {
  if (json.is_array()) return {json[0].get<int>(), json[1].get<int>()};
  return json.get<int>();
}

ops::DType dtype_from(const Json& json) {
  std::string name = json.is_string() ? json.get<std::string>() : "float32";
  if (name == "int32") return ops::DType::kI32;
  if (name == "int64") return ops::DType::kI64;
  return ops::DType::kF32;
}

std::string activation_from(const Json& config) {
  if (!config.contains("activation") || config["activation"].is_null()) return "";
  const Json& value = config["activation"];
  std::string name = value.is_string() ? value.get<std::string>()
                                       : value.value("config", Json::object()).value("name", "");
  return name == "linear" ? "" : name;
}

}  // namespace

std::string python_json_dumps(const Json& value) {
  std::string out;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      out += (out.empty() ? "{" : ", ") + Json(key).dump() + ": " + python_json_dumps(item);
    return out.empty() ? "{}" : out + "}";
  }
  if (value.is_array()) {
    for (const Json& item : value) out += (out.empty() ? "[" : ", ") + python_json_dumps(item);
    return out.empty() ? "[]" : out + "]";
  }
  return value.dump(-1, ' ', /*ensure_ascii=*/true);
}

Json serialize_model(const Model& model, KerasVersion version) {
  const bool k3 = version == KerasVersion::k3;
  auto nodes = nodes_by_layer(model);
  Shape input_shape = model.inputs().at(0).shape;
  Json layer_list = Json::array();
  Json config;
  config["name"] = model.name();
  config["trainable"] = true;
  if (model.is_sequential()) {
    if (k3)
      config["dtype"] = Json{{"module", "keras"},
                             {"class_name", "DTypePolicy"},
                             {"config", {{"name", "float32"}}},
                             {"registered_name", nullptr}};
    const Layer& input = *model.inputs()[0].node->layer;
    Json first = layer_config(input, input_shape, version);
    if (!dynamic_cast<const layers::InputLayerImpl*>(&input)) first["name"] = "input_layer";
    layer_list.push_back(keras_object("keras.layers", "InputLayer", first, version));
    for (const auto& layer : model.layers()) {
      const Node* node = nodes.at(layer.get());
      Json entry = keras_object("keras.layers", layer->class_name(),
                                layer_config(*layer, {}, version), version);
      if (k3) entry["build_config"] = {{"input_shape", shape_json(node->inputs[0].shape)}};
      layer_list.push_back(entry);
    }
    config["layers"] = layer_list;
    config["build_input_shape"] = shape_json(input_shape);
  } else {
    for (const auto& layer : model.layers()) {
      const Node* node = nodes.at(layer.get());
      Json entry = keras_object("keras.layers", layer->class_name(),
                                layer_config(*layer, node->output_shape, version), version);
      if (k3 && !node->inputs.empty())
        entry["build_config"] = {
            {"input_shape", node->inputs.size() == 1 ? shape_json(node->inputs[0].shape) : [&] {
               Json shapes = Json::array();
               for (const auto& x : node->inputs) shapes.push_back(shape_json(x.shape));
               return shapes;
             }()}};
      entry["name"] = layer->name();
      entry["inbound_nodes"] = inbound_nodes(*node, version);
      layer_list.push_back(entry);
    }
    config["layers"] = layer_list;
    Json inputs = Json::array(), outputs = Json::array();
    for (const auto& x : model.inputs()) inputs.push_back({x.node->layer->name(), 0, 0});
    for (const auto& x : model.outputs()) outputs.push_back({x.node->layer->name(), 0, 0});
    config["input_layers"] = inputs;
    config["output_layers"] = outputs;
  }
  Json out;
  if (k3) out["module"] = model.is_sequential() ? "keras" : "keras.src.models.functional";
  out["class_name"] = model.is_sequential() ? "Sequential" : (k3 ? "Functional" : "Functional");
  out["config"] = config;
  if (k3) {
    out["registered_name"] = model.is_sequential() ? Json(nullptr) : Json("Functional");
    out["build_config"] = {
        {"input_shape", model.is_sequential() ? shape_json(input_shape) : Json(nullptr)}};
    Json compile = compile_config(model, version);
    if (!compile.is_null()) out["compile_config"] = compile;
  }
  return out;
}

LayerPtr layer_from_config(const Json& entry, const std::string& where) {
  std::string cls = entry.value("class_name", "");
  Json c = entry.value("config", Json::object());
  std::string name = c.value("name", entry.value("name", ""));
  if (cls == "InputLayer") {
    Json shape =
        c.contains("batch_shape") ? c["batch_shape"] : c.value("batch_input_shape", Json());
    Shape full = shape_from(shape, where);
    return layers::InputLayer({.shape = Shape(full.begin() + 1, full.end()),
                               .dtype = dtype_from(c.value("dtype", Json("float32"))),
                               .name = name});
  }
  if (cls == "Reshape") return layers::Reshape(shape_from(c["target_shape"], where), name);
  if (cls == "Dense")
    return layers::Dense({.units = c["units"].get<int64_t>(),
                          .activation = activation_from(c),
                          .use_bias = c.value("use_bias", true),
                          .name = name,
                          .kernel_regularizer = regularizer_from(c, "kernel_regularizer", where),
                          .bias_regularizer = regularizer_from(c, "bias_regularizer", where)});
  if ((cls == "Conv2D" || cls == "MaxPooling2D") &&
      c.value("data_format", "channels_last") != "channels_last")
    throw UnimplementedError(
        fmt::format("{}: layer \"{}\" is {} with data_format {}; est::keras "
                    "supports channels_last",
                    where, name, cls, c["data_format"].dump()));
  if (cls == "Conv2D")
    return layers::Conv2D({.filters = c["filters"].get<int64_t>(),
                           .kernel_size = size2(c["kernel_size"]),
                           .strides = size2(c.value("strides", Json(1))),
                           .padding = c.value("padding", "valid"),
                           .dilation_rate = size2(c.value("dilation_rate", Json(1))),
                           .activation = activation_from(c),
                           .use_bias = c.value("use_bias", true),
                           .name = name});
  if (cls == "MaxPooling2D") {
    nn::Size2 pool = size2(c.value("pool_size", Json(2)));
    Json strides = c.value("strides", Json());
    return layers::MaxPooling2D({.pool_size = pool,
                                 .strides = strides.is_null() ? pool : size2(strides),
                                 .padding = c.value("padding", "valid"),
                                 .name = name});
  }
  if (cls == "Flatten") return layers::Flatten(name);
  if (cls == "Dropout") return layers::Dropout({.rate = c.value("rate", 0.5), .name = name});
  if (cls == "BatchNormalization")
    return layers::BatchNormalization({.momentum = c.value("momentum", 0.99),
                                       .epsilon = c.value("epsilon", 1e-3),
                                       .center = c.value("center", true),
                                       .scale = c.value("scale", true),
                                       .name = name});
  if (cls == "Embedding")
    return layers::Embedding({.input_dim = c["input_dim"].get<int64_t>(),
                              .output_dim = c["output_dim"].get<int64_t>(),
                              .name = name});
  if (cls == "Concatenate") return layers::Concatenate(c.value("axis", -1), name);
  if (cls == "Add") return layers::Add(name);
  throw InvalidArgumentError(fmt::format(
      "{}: unknown layer class '{}' (layer \"{}\"); est::keras can rebuild InputLayer, Reshape, "
      "Dense, Conv2D, MaxPooling2D, Flatten, Dropout, BatchNormalization, Embedding, "
      "Concatenate, Add",
      where, cls, name));
}

namespace {

// The layer names a functional layer entry is called on.
std::vector<std::string> inbound_layers(const Json& entry, const std::string& where) {
  Json nodes = entry.value("inbound_nodes", Json::array());
  if (nodes.empty()) return {};
  if (nodes.size() > 1)
    throw UnimplementedError(
        fmt::format("{}: layer \"{}\" is called {} times (shared layers are not supported)", where,
                    entry.value("name", ""), nodes.size()));
  std::vector<std::string> out;
  const Json& node = nodes[0];
  std::function<void(const Json&)> collect = [&](const Json& value) {
    if (value.is_object() && value.value("class_name", "") == "__keras_tensor__")
      out.push_back(value["config"]["keras_history"][0].get<std::string>());
    else if (value.is_array() && !value.empty() && value[0].is_string())
      out.push_back(value[0].get<std::string>());  // Keras 2: [layer, node, tensor, kwargs]
    else if (value.is_array())
      for (const Json& item : value) collect(item);
  };
  collect(node.is_object() ? node.value("args", Json::array()) : node);
  return out;
}

std::vector<std::string> endpoint_layers(const Json& list) {
  std::vector<std::string> out;
  if (list.is_array() && !list.empty() && list[0].is_string()) return {list[0].get<std::string>()};
  for (const Json& item : list) out.push_back(item[0].get<std::string>());
  return out;
}

}  // namespace

std::unique_ptr<Model> deserialize_model(const Json& model, const std::string& where) {
  if (!model.is_object() || !model.contains("class_name") || !model.contains("config"))
    throw DataLossError(fmt::format(
        "{}: the model config is not a Keras object with \"class_name\" and \"config\"", where));
  std::string cls = model["class_name"].get<std::string>();
  const Json& config = model["config"];
  std::string name = config.value("name", "");
  const Json layer_list = config.value("layers", Json::array());
  if (cls == "Sequential") {
    std::vector<LayerPtr> list;
    for (const Json& entry : layer_list) list.push_back(layer_from_config(entry, where));
    auto out = std::make_unique<Sequential>(std::move(list), name);
    if (!out->built() && config.contains("build_input_shape") &&
        !config["build_input_shape"].is_null()) {
      Shape shape = shape_from(config["build_input_shape"], where);
      out->build(Shape(shape.begin() + 1, shape.end()));
    }
    return out;
  }
  if (cls != "Functional" && cls != "Model")
    throw InvalidArgumentError(fmt::format(
        "{}: unknown model class '{}'; load_model rebuilds Sequential and Functional models", where,
        cls));
  std::map<std::string, KerasTensor> tensors;
  for (const Json& entry : layer_list) {
    LayerPtr layer = layer_from_config(entry, where);
    std::string layer_name = entry.value("name", layer->name());
    if (auto input = std::dynamic_pointer_cast<layers::InputLayerImpl>(layer)) {
      tensors[layer_name] = Input(input->options().shape, input->name(), input->options().dtype);
      continue;
    }
    std::vector<KerasTensor> args;
    for (const std::string& from : inbound_layers(entry, where)) {
      if (!tensors.count(from))
        throw DataLossError(
            fmt::format("{}: layer \"{}\" is called on \"{}\", which comes "
                        "later or not at all in the config",
                        where, layer_name, from));
      args.push_back(tensors.at(from));
    }
    tensors[layer_name] = args.size() == 1 ? (*layer)(args[0]) : (*layer)(args);
  }
  auto endpoints = [&](const char* key) {
    std::vector<KerasTensor> out;
    for (const auto& layer_name : endpoint_layers(config.value(key, Json::array()))) {
      if (!tensors.count(layer_name))
        throw DataLossError(fmt::format("{}: {} names layer \"{}\", which the config lacks", where,
                                        key, layer_name));
      out.push_back(tensors.at(layer_name));
    }
    return out;
  };
  std::vector<KerasTensor> inputs = endpoints("input_layers");
  std::vector<KerasTensor> outputs = endpoints("output_layers");
  return std::make_unique<Model>(inputs, outputs, name);
}

}  // namespace est::keras
