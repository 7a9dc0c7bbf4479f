// A Keras model as TF2's object-based checkpoint (see object_checkpoint.h). Follows Keras 2.x
// keras/engine/functional.py (_layer_checkpoint_dependencies), keras/optimizers/optimizer_v2/
// (optimizer_v2.py _create_all_weights and _create_hypers; adam.py, gradient_descent.py,
// rmsprop.py, adagrad.py for the hyperparameters and slots), and TensorFlow's
// tensorflow/python/checkpoint/graph_view.py / util.py (breadth-first numbering, slot naming).
#include "keras/object_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

#include "checkpoint/tf_bundle_writer.h"
#include "checkpoint/tf_object_graph.h"
#include "ops/error.h"

namespace est::keras {
namespace {

using checkpoint::TfObjectNode;

constexpr const char* kAttributes = "/.ATTRIBUTES/VARIABLE_VALUE";

double config_value(const Optimizer& optimizer, const char* key, double otherwise) {
  auto it = optimizer.config.find(key);
  return it == optimizer.config.end() ? otherwise : it->second;
}

// OptimizerV2's hyperparameters as _create_hypers makes them variables (sorted by name), and
// its slot names in the order _create_slots adds them.
std::map<std::string, double> hyperparameters(const Optimizer& optimizer, double learning_rate) {
  std::map<std::string, double> out{{"learning_rate", learning_rate}, {"decay", 0.0}};
  if (optimizer.name == "Adam") {
    out["beta_1"] = config_value(optimizer, "beta_1", 0.9);
    out["beta_2"] = config_value(optimizer, "beta_2", 0.999);
  } else if (optimizer.name == "SGD") {
    out["momentum"] = config_value(optimizer, "momentum", 0.0);
  } else if (optimizer.name == "RMSprop") {
    out["rho"] = config_value(optimizer, "rho", 0.9);
    out["momentum"] = config_value(optimizer, "momentum", 0.0);
  } else if (optimizer.name != "Adagrad") {
    throw UnimplementedError(fmt::format(
        "model_to_estimator: optimizer {} has no object-based checkpoint layout here; pass "
        ".checkpoint_format = \"saver\"",
        optimizer.name));
  }
  return out;
}

std::vector<std::string> slot_names(const Optimizer& optimizer) {
  if (optimizer.name == "Adam") return {"m", "v"};
  if (optimizer.name == "Adagrad") return {"accumulator"};
  if (optimizer.name == "SGD")
    return config_value(optimizer, "momentum", 0) != 0 ? std::vector<std::string>{"momentum"}
                                                       : std::vector<std::string>{};
  std::vector<std::string> names{"rms"};  // RMSprop
  if (config_value(optimizer, "momentum", 0) != 0) names.push_back("momentum");
  if (config_value(optimizer, "centered", 0) != 0) names.push_back("mg");
  return names;
}

// The graph being built: nodes, and each node's path from the model (its first, shortest one).
struct Graph {
  std::vector<TfObjectNode> nodes{TfObjectNode{}};
  std::vector<std::string> paths{""};

  int add(int parent, const std::string& local_name) {
    int id = static_cast<int>(nodes.size());
    nodes.emplace_back();
    paths.push_back(paths[static_cast<size_t>(parent)].empty()
                        ? local_name
                        : paths[static_cast<size_t>(parent)] + "/" + local_name);
    nodes[static_cast<size_t>(parent)].children.emplace_back(id, local_name);
    return id;
  }
  void link(int parent, int child, const std::string& local_name) {
    nodes[static_cast<size_t>(parent)].children.emplace_back(child, local_name);
  }
};

}  // namespace

std::vector<std::string> write_object_checkpoint(const std::string& prefix, const Model& model,
                                                 const ObjectCheckpointOptions& options) {
  const auto& optimizer = model.optimizer();
  if (!optimizer)
    throw FailedPreconditionError(fmt::format(
        "model \"{}\" is not compiled; compile it before writing its checkpoint", model.name()));
  auto specs = model.weights();
  if (options.weights.size() != specs.size())
    throw InvalidArgumentError(fmt::format(
        "model \"{}\" has {} weights, but {} values were given for its object-based checkpoint",
        model.name(), specs.size(), options.weights.size()));
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < specs.size(); ++i) values[specs[i].first] = options.weights[i];

  // Breadth first from the model: its layers (those with weights first as layer_with_weights-k),
  // the optimizer, the estimator's global step; then the layers' variables, the optimizer's.
  Graph graph;
  std::vector<std::pair<int, std::string>> layer_nodes;  // node, layer name
  int with_weights = 0;
  auto layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string prefix_of_layer = layers[i]->name() + "/";
    bool has_weights = std::any_of(specs.begin(), specs.end(), [&](const auto& spec) {
      return spec.first.starts_with(prefix_of_layer);
    });
    int node = -1;
    if (has_weights) node = graph.add(0, fmt::format("layer_with_weights-{}", with_weights++));
    if (node < 0)
      node = graph.add(0, fmt::format("layer-{}", i));
    else
      graph.link(0, node, fmt::format("layer-{}", i));
    layer_nodes.emplace_back(node, layers[i]->name());
  }
  int optimizer_node = graph.add(0, "optimizer");
  std::vector<std::pair<int, Tensor>> tensors;  // node -> value, for the attributes below
  std::map<std::string, int> variable_nodes;    // full name -> node
  auto variable = [&](int node, const std::string& full_name, Tensor value) {
    graph.nodes[static_cast<size_t>(node)].attributes.push_back(
        {.full_name = full_name,
         .checkpoint_key = graph.paths[static_cast<size_t>(node)] + kAttributes});
    tensors.emplace_back(node, std::move(value));
  };
  if (options.estimator_global_step) {
    int node = graph.add(0, "estimator_global_step");
    variable(node, "global_step",
             Tensor::full({}, static_cast<double>(*options.estimator_global_step), ops::DType::kI64));
  }
  for (const auto& [node, layer_name] : layer_nodes)
    for (const auto& [name, spec] : specs) {
      if (!name.starts_with(layer_name + "/")) continue;
      int child = graph.add(node, name.substr(layer_name.size() + 1));
      variable(child, name, values.at(name));
      variable_nodes[name] = child;
    }
  const std::string& opt = optimizer->name;
  variable(graph.add(optimizer_node, "iter"), opt + "/iter",
           Tensor::full({}, static_cast<double>(options.iterations), ops::DType::kI64));
  for (const auto& [name, value] : hyperparameters(*optimizer, options.learning_rate))
    variable(graph.add(optimizer_node, name), opt + "/" + name, Tensor::scalar(value));

  // Slots after every other node, slot name by slot name, each over the trainable variables.
  double accumulator = config_value(*optimizer, "initial_accumulator_value", 0.1);
  for (const std::string& slot : slot_names(*optimizer))
    for (const auto& [name, spec] : specs) {
      if (!spec.trainable) continue;
      int original = variable_nodes.at(name);
      int node = static_cast<int>(graph.nodes.size());
      graph.nodes.emplace_back();
      graph.paths.push_back(graph.paths[static_cast<size_t>(original)] +
                            "/.OPTIMIZER_SLOT/optimizer/" + slot);
      graph.nodes[static_cast<size_t>(optimizer_node)].slot_variables.push_back(
          {.original_variable_node_id = original,
           .slot_name = slot,
           .slot_variable_node_id = node});
      const Tensor& weight = values.at(name);
      variable(
          node, fmt::format("{}/{}/{}", opt, name, slot),
          Tensor::full(weight.shape(), slot == "accumulator" ? accumulator : 0.0, weight.dtype()));
    }

  checkpoint::TfBundleWriter writer(prefix);
  std::vector<std::string> keys;
  for (const auto& [node, value] : tensors) {
    const std::string& key =
        graph.nodes[static_cast<size_t>(node)].attributes.back().checkpoint_key;
    writer.add(key, value);
    keys.push_back(key);
  }
  Tensor graph_bytes = Tensor::empty({}, DType::kString);
  graph_bytes.data<std::string>()[0] = checkpoint::serialize_tf_object_graph(graph.nodes);
  writer.add(std::string(checkpoint::kTfObjectGraphKey), graph_bytes);
  keys.emplace_back(checkpoint::kTfObjectGraphKey);
  writer.finish();
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace est::keras
