// Model and Sequential: the graph of layers, its weights and its call (see model.h).
#include "keras/model.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <system_error>

#include "estimator/estimator.h"
#include "ops/error.h"

namespace est::keras {
namespace {

// Input 0 of layer "sequential" is incompatible...: Keras's input_spec message, with the fix.
void check_input(const std::string& model, size_t index, const Shape& expected,
                 const Shape& found) {
  bool ok = expected.size() == found.size();
  for (size_t d = 1; ok && d < expected.size(); ++d)
    ok = expected[d] < 0 || expected[d] == found[d];
  if (!ok)
    throw InvalidArgumentError(fmt::format(
        "Input {} of layer \"{}\" is incompatible with the layer: expected shape={}, found "
        "shape={}; feed batches of the model's input shape (or change the Input/InputLayer "
        "shape)",
        index, model, shape_tuple(expected), shape_tuple(found)));
}

}  // namespace

Model::Model(std::string name) : name_(std::move(name)) {}

Model::Model(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs, std::string name)
    : name_(name.empty() ? unique_object_name("model") : std::move(name)) {
  set_graph(std::move(inputs), std::move(outputs));
}

Model::Model(KerasTensor input, KerasTensor output, std::string name)
    : Model(std::vector<KerasTensor>{std::move(input)}, std::vector<KerasTensor>{std::move(output)},
            std::move(name)) {}

Model::~Model() {
  if (temporary_model_dir_.empty()) return;
  estimator_.reset();  // its checkpoint writer finishes first
  std::error_code ignored;
  std::filesystem::remove_all(temporary_model_dir_, ignored);
}

void Model::set_graph(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs) {
  if (inputs.empty() || outputs.empty())
    throw InvalidArgumentError(
        fmt::format("Model \"{}\": needs at least one input and one output", name_));
  std::set<const Node*> input_nodes;
  for (const auto& input : inputs) {
    if (!input.node || !std::dynamic_pointer_cast<layers::InputLayerImpl>(input.node->layer))
      throw InvalidArgumentError(fmt::format(
          "Model \"{}\": every input must be a tensor made by keras::Input(shape)", name_));
    input_nodes.insert(input.node.get());
  }
  // Depth-first from the outputs, inputs first: the nodes in an order they can run.
  std::vector<std::shared_ptr<const Node>> order;
  std::set<const Node*> done;
  std::function<void(const std::shared_ptr<const Node>&)> visit =
      [&](const std::shared_ptr<const Node>& node) {
        if (done.count(node.get())) return;
        if (node->inputs.empty() && !input_nodes.count(node.get()))
          throw InvalidArgumentError(fmt::format(
              "Model \"{}\": output depends on input \"{}\", which is not in the model's inputs; "
              "pass it in Model(inputs, outputs)",
              name_, node->layer->name()));
        for (const auto& x : node->inputs) visit(x.node);
        done.insert(node.get());
        order.push_back(node);
      };
  for (const auto& input : inputs) visit(input.node);
  for (const auto& output : outputs) visit(output.node);
  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
  nodes_ = std::move(order);
}

std::vector<Tensor> Model::regularization_losses(nn::ModelContext& ctx) const {
  std::vector<Tensor> out;
  std::set<const Layer*> done;
  for (const auto& node : nodes_) {
    if (!done.insert(node->layer.get()).second) continue;  // a shared layer's weights once
    std::vector<Shape> shapes;
    for (const auto& x : node->inputs) shapes.push_back(x.shape);
    for (auto& loss : node->layer->regularization_losses(ctx, shapes)) out.push_back(loss);
  }
  return out;
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (const auto& input : inputs_) names.push_back(input.node->layer->name());
  return names;
}

std::vector<std::string> Model::output_names() const {
  // functional.py's _set_output_names: a repeated layer name gets "_1", "_2", ... (counted per
  // layer name) until it is unique.
  std::vector<std::string> names;
  std::set<std::string> taken;
  std::map<std::string, int> suffix;
  for (const auto& output : outputs_) {
    const std::string& layer = output.node->layer->name();
    std::string proposal = layer;
    while (taken.count(proposal)) {
      int& count = suffix.try_emplace(layer, 1).first->second;
      proposal = fmt::format("{}_{}", layer, count++);
    }
    taken.insert(proposal);
    names.push_back(proposal);
  }
  return names;
}

std::vector<LayerPtr> Model::layers() const {
  std::vector<LayerPtr> out;
  for (const auto& node : nodes_)
    if (std::find(out.begin(), out.end(), node->layer) == out.end()) out.push_back(node->layer);
  return out;
}

std::vector<std::pair<std::string, WeightSpec>> Model::weights() const {
  std::vector<std::pair<std::string, WeightSpec>> out;
  std::set<const Layer*> seen;
  for (const auto& node : nodes_) {
    if (!seen.insert(node->layer.get()).second) continue;
    std::vector<Shape> shapes;
    for (const auto& x : node->inputs) shapes.push_back(x.shape);
    for (auto& w : node->layer->weights(shapes))
      out.emplace_back(node->layer->name() + "/" + w.name, w);
  }
  // Keras lists trainable weights before non-trainable ones (model.weights).
  std::stable_partition(out.begin(), out.end(), [](const auto& w) { return w.second.trainable; });
  return out;
}

int64_t Model::count_params() const {
  int64_t total = 0;
  for (const auto& [name, w] : weights()) total += ops::num_elements(w.shape);
  return total;
}

bool Model::sequential_like() const {
  // keras/utils/layer_utils.py: one node per depth, each with at most one input.
  if (inputs_.size() != 1) return false;
  std::map<const Node*, int> consumers;
  for (const auto& node : nodes_) {
    if (node->inputs.size() > 1) return false;
    for (const auto& x : node->inputs)
      if (++consumers[x.node.get()] > 1) return false;
  }
  return true;
}

std::vector<Tensor> Model::call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const {
  if (inputs.size() != inputs_.size())
    throw InvalidArgumentError(
        fmt::format("Layer \"{}\" expects {} input(s), but it received {} "
                    "input tensors",
                    name_, inputs_.size(), inputs.size()));
  std::map<const Node*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_input(name_, i, inputs_[i].shape, inputs[i].shape());
    values[inputs_[i].node.get()] = inputs[i];
  }
  for (const auto& node : nodes_) {
    if (node->inputs.empty()) continue;
    std::vector<Tensor> args;
    for (const auto& x : node->inputs) args.push_back(values.at(x.node.get()));
    values[node.get()] = node->layer->call(ctx, args);
  }
  std::vector<Tensor> out;
  for (const auto& output : outputs_) out.push_back(values.at(output.node.get()));
  return out;
}

Sequential::Sequential(std::vector<LayerPtr> layers, std::string name)
    : Model(name.empty() ? unique_object_name("sequential") : std::move(name)) {
  for (auto& layer : layers) add(std::move(layer));
}

void Sequential::add(LayerPtr layer) {
  if (!layer) throw InvalidArgumentError(fmt::format("Sequential \"{}\": add(null)", name()));
  auto input = std::dynamic_pointer_cast<layers::InputLayerImpl>(layer);
  if (input && !layers_.empty())
    throw InvalidArgumentError(
        fmt::format("Sequential \"{}\": an InputLayer can only be the first layer", name()));
  layers_.push_back(std::move(layer));
  auto first = std::dynamic_pointer_cast<layers::InputLayerImpl>(layers_.front());
  if (first) build(first->options().shape);
}

void Sequential::build(const Shape& input_shape) {
  auto first = std::dynamic_pointer_cast<layers::InputLayerImpl>(layers_.empty() ? nullptr
                                                                                 : layers_.front());
  KerasTensor x;
  if (first) {
    auto node = std::make_shared<Node>(Node{first, {}, first->output_shape({})});
    x = KerasTensor{node, node->output_shape};
  } else {
    x = Input(input_shape);
  }
  KerasTensor input = x;
  for (size_t i = first ? 1 : 0; i < layers_.size(); ++i) x = (*layers_[i])(x);
  set_graph({input}, {x});
}

void Sequential::build_from_batch(const Shape& feature_shape) {
  if (built()) return;
  if (layers_.empty())
    throw InvalidArgumentError(fmt::format("Sequential \"{}\" has no layers; add() some", name()));
  build(Shape(feature_shape.begin() + 1, feature_shape.end()));
}

std::vector<LayerPtr> Sequential::layers() const {
  std::vector<LayerPtr> out;
  for (const auto& layer : layers_)
    if (!std::dynamic_pointer_cast<layers::InputLayerImpl>(layer)) out.push_back(layer);
  return out;
}

}  // namespace est::keras
