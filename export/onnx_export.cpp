// Trace -> ONNX ModelProto (see onnx_export.h): the structural check of the two traces, the
// liveness of nodes from the outputs back, then the graph's inputs, initializers and nodes. The
// nodes are written by OnnxEmitter (onnx_emitter.h), the lookup tables by onnx_lookup.h.
#include "export/onnx_export.h"

#include <cstring>
#include <set>

#include <fmt/format.h>

#include "export/onnx_emitter.h"
#include "export/onnx_lookup.h"
#include "onnx_subset.pb.h"
#include "ops/error.h"

namespace est::serving {
namespace {
void check_same_structure(const Trace& a, const Trace& b) {
  const size_t n = std::min(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < n; ++i)
    if (!(a.nodes[i] == b.nodes[i]))
      throw UnimplementedError(fmt::format(
          "export: model_fn runs different ops at two batch sizes (op #{} is '{}' in one trace "
          "and '{}' in the other); the export needs one graph for every batch size: keep "
          "batch- and value-dependent branches out of the PREDICT path",
          i, a.nodes[i].name, b.nodes[i].name));
  if (a.nodes.size() != b.nodes.size() || a.values.size() != b.values.size() ||
      a.inputs != b.inputs || a.outputs != b.outputs)
    throw UnimplementedError(
        "export: model_fn runs a different number of ops at two batch sizes; the export needs "
        "one graph for every batch size");
  for (size_t id = 0; id < a.values.size(); ++id)
    if (a.values[id].shape.size() != b.values[id].shape.size() ||
        a.values[id].dtype != b.values[id].dtype)
      throw UnimplementedError(fmt::format(
          "export: a tensor changes rank or dtype with the batch size ({} vs {}); the export "
          "needs one graph for every batch size",
          ops::shape_str(a.values[id].shape), ops::shape_str(b.values[id].shape)));
}

bool same_contents(const Tensor& x, const Tensor& y) {
  if (x.shape() != y.shape() || x.dtype() != y.dtype()) return false;
  Tensor hx = x.to(Device::cpu()), hy = y.to(Device::cpu());
  return std::memcmp(hx.raw_data(), hy.raw_data(), hx.nbytes()) == 0;
}

}  // namespace

std::string to_onnx(const Trace& trace, const Trace& other, const std::string& graph_name,
                    std::vector<LookupStep>* lookups) {
  check_same_structure(trace, other);
  // Liveness: the nodes the outputs depend on, found backwards from them; a feature lookup's
  // ids are a graph input, so the search stops there.
  std::map<int, size_t> producer;
  for (size_t i = 0; i < trace.nodes.size(); ++i)
    for (int id : trace.nodes[i].outputs) producer[id] = i;
  std::set<int> live_values;
  std::vector<int> pending;
  for (const auto& [name, id] : trace.outputs) pending.push_back(id);
  std::set<size_t> live_nodes, live_lookups;
  while (!pending.empty()) {
    const int id = pending.back();
    pending.pop_back();
    if (id < 0 || !live_values.insert(id).second) continue;
    auto found = producer.find(id);
    if (found == producer.end()) continue;
    if (is_feature_lookup(trace, trace.nodes[found->second])) {
      live_lookups.insert(found->second);
      continue;
    }
    live_nodes.insert(found->second);
    for (int input : trace.nodes[found->second].inputs) pending.push_back(input);
  }

  onnx::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  model.set_producer_name("est");
  model.set_producer_version("0.1.0");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpsetVersion);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(graph_name);
  OnnxEmitter emitter(trace, other, graph);
  emitter.set_inputs();
  // What cannot be written is refused by name first: a host computation also leaves constants
  // that change with the input behind it.
  for (size_t i : live_nodes) {
    if (trace.nodes[i].kind == NodeKind::kUnsupported ||
        trace.nodes[i].kind == NodeKind::kHostComputed)
      refuse(trace.nodes[i], "it has no ONNX form in est's exporter");
  }
  // Feature lookups: each reads a graph input (through reshapes) and feeds "<column>/ids".
  FeatureLookups feature =
      feature_lookups(emitter, producer, live_lookups, /*write_steps=*/lookups != nullptr);
  for (const auto& [name, id] : trace.inputs)
    if (live_values.count(id) || !feature.looked_up.count(id)) emitter.add_graph_input(name, id);
  if (lookups != nullptr)
    for (LookupStep& step : feature.steps) lookups->push_back(std::move(step));
  for (const auto& [id, value] : trace.constants) {
    if (!live_values.count(id)) continue;
    auto theirs = other.constants.find(id);
    if (theirs == other.constants.end() || !same_contents(value, theirs->second))
      throw UnimplementedError(fmt::format(
          "export: a constant of shape {}{} changes with the batch size or the input values "
          "(a tensor computed outside the ops, e.g. from values read on the host, or created "
          "with the batch's shape); ONNX cannot hold it as an initializer",
          ops::shape_str(value.shape()),
          trace.constant_names.count(id) ? " ('" + trace.constant_names.at(id) + "')" : ""));
    emitter.add_initializer(emitter.value_name(id), value);
  }
  for (size_t i : live_nodes) {
    if (trace.nodes[i].kind == NodeKind::kLookup)
      emit_lookup(emitter, trace.nodes[i]);
    else
      emitter.emit(trace.nodes[i]);
  }
  if (emitter.uses_ml_domain()) {
    auto* ml = model.add_opset_import();
    ml->set_domain(kOnnxMlDomain);
    ml->set_version(kOnnxMlOpsetVersion);
  }
  for (const auto& [name, id] : trace.outputs) {
    emitter.add("Identity", {emitter.value_name(id)}, {name});
    emitter.add_graph_output(name, id);
  }
  return model.SerializeAsString();
}

}  // namespace est::serving
