// TF2 object-based checkpoints: variable and slot names mapped to the keys of the object graph.
// Follows tensorflow/python/checkpoint/checkpoint.py (object_graph_key_mapping) and, for the
// slots' names, the TF1 optimizers of tensorflow/python/training/ (adam.py, adagrad.py,
// ftrl.py, rmsprop.py, momentum.py) and Keras' optimizer_v2 (the same slot names but Ftrl's
// accumulator).
#include "checkpoint/tf_object_graph.h"

#include <fmt/format.h>

#include "checkpoint/tf_bundle_reader.h"
#include "ops/error.h"
#include "tf_trackable_object_graph.pb.h"

namespace est::checkpoint {
namespace {

using Graph = tfproto::TrackableObjectGraph;

// The variable a node holds: its VARIABLE_VALUE attribute (the first attribute otherwise).
const Graph::TrackableObject::SerializedTensor* variable_value(const Graph::TrackableObject& node) {
  for (const auto& attribute : node.attributes())
    if (attribute.name() == "VARIABLE_VALUE") return &attribute;
  return node.attributes_size() ? &node.attributes(0) : nullptr;
}

const Graph::TrackableObject& node_at(const Graph& graph, int id, const std::string& where,
                                      std::string_view what) {
  if (id < 0 || id >= graph.nodes_size())
    throw DataLossError(
        fmt::format("TensorFlow checkpoint {}: the object graph's {} names node {} of {}; the "
                    "{} entry is damaged, write the checkpoint again",
                    where, what, id, graph.nodes_size(), kTfObjectGraphKey));
  return graph.nodes(id);
}

}  // namespace

std::string tf1_slot_name(std::string_view slot_name, const std::map<std::string, int>& siblings) {
  auto has = [&](const char* name) { return siblings.count(name) > 0; };
  if (has("m") && has("v")) {
    if (slot_name == "m") return "Adam";
    if (slot_name == "v") return "Adam_1";
  }
  if (has("linear")) {
    if (slot_name == "accum" || slot_name == "accumulator") return "Ftrl";
    if (slot_name == "linear") return "Ftrl_1";
  }
  if (has("rms")) {
    if (slot_name == "rms") return "RMSProp";
    if (slot_name == "mg") return "RMSProp_1";
    if (slot_name == "momentum") return has("mg") ? "RMSProp_2" : "RMSProp_1";
  }
  if (slot_name == "accumulator") return "Adagrad";
  if (slot_name == "momentum") return "Momentum";
  return std::string(slot_name);
}

std::map<std::string, std::string, std::less<>> tf_object_graph_names(std::string_view serialized,
                                                                      const std::string& where) {
  Graph graph;
  if (!graph.ParseFromArray(serialized.data(), static_cast<int>(serialized.size())))
    throw DataLossError(fmt::format(
        "TensorFlow checkpoint {}: its {} entry ({} bytes) is not a TrackableObjectGraph; the "
        "checkpoint is damaged, write it again",
        where, kTfObjectGraphKey, serialized.size()));
  std::map<std::string, std::string, std::less<>> names;
  for (const auto& node : graph.nodes())
    for (const auto& attribute : node.attributes())
      if (!attribute.full_name().empty() && !attribute.checkpoint_key().empty())
        names.emplace(attribute.full_name(), attribute.checkpoint_key());
  for (const auto& node : graph.nodes()) {
    std::map<std::string, int> siblings;
    for (const auto& slot : node.slot_variables()) ++siblings[slot.slot_name()];
    for (const auto& slot : node.slot_variables()) {
      const auto* original = variable_value(
          node_at(graph, slot.original_variable_node_id(), where, "slot's variable"));
      const auto* value =
          variable_value(node_at(graph, slot.slot_variable_node_id(), where, "slot's value"));
      if (!original || original->full_name().empty() || !value) continue;
      names.emplace(original->full_name() + "/" + tf1_slot_name(slot.slot_name(), siblings),
                    value->checkpoint_key());
    }
  }
  return names;
}

std::string serialize_tf_object_graph(const std::vector<TfObjectNode>& nodes) {
  Graph graph;
  for (const TfObjectNode& node : nodes) {
    auto* out = graph.add_nodes();
    for (const auto& [id, local_name] : node.children) {
      auto* child = out->add_children();
      child->set_node_id(id);
      child->set_local_name(local_name);
    }
    for (const auto& attribute : node.attributes) {
      auto* tensor = out->add_attributes();
      tensor->set_name(attribute.name);
      tensor->set_full_name(attribute.full_name);
      tensor->set_checkpoint_key(attribute.checkpoint_key);
    }
    for (const auto& slot : node.slot_variables) {
      auto* reference = out->add_slot_variables();
      reference->set_original_variable_node_id(slot.original_variable_node_id);
      reference->set_slot_name(slot.slot_name);
      reference->set_slot_variable_node_id(slot.slot_variable_node_id);
    }
  }
  std::string bytes;
  graph.SerializeToString(&bytes);
  return bytes;
}

std::map<std::string, std::string, std::less<>> tf_object_graph_names(
    const TfBundleReader& reader) {
  if (!reader.contains(kTfObjectGraphKey)) return {};
  ops::Tensor graph = reader.load_variable(kTfObjectGraphKey);
  if (graph.dtype() != ops::DType::kString || graph.numel() != 1)
    throw DataLossError(fmt::format(
        "TensorFlow checkpoint {}: its {} entry is {} {}, not one string; the checkpoint is "
        "damaged, write it again",
        reader.prefix(), kTfObjectGraphKey, ops::dtype_name(graph.dtype()),
        ops::shape_str(graph.shape())));
  auto names = tf_object_graph_names(graph.data<std::string>()[0], reader.prefix());
  std::erase_if(names, [&](const auto& pair) {
    return reader.contains(pair.first) || !reader.contains(pair.second);
  });
  return names;
}

}  // namespace est::checkpoint
