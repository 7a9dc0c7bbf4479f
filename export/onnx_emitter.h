// OnnxEmitter: writes the nodes of one traced function into an ONNX GraphProto, for to_onnx
// (onnx_export.h). It names the values (graph inputs, named variables, "est/value_<id>"), adds
// initializers, nodes and attributes, and writes each traced registry op as the ONNX nodes of
// the same result (emit). It is internal to export/: the lookup tables' ONNX forms are written
// through it by onnx_lookup.cpp, so that the decisions about lookups stay in one file.
//
// Every value has the shape and dtype of the first trace; a dimension that differs in the
// second trace (the same function at another batch size) is a dynamic one. Names the emitter
// makes up are "est/<kind>_<n>", n counting up over the whole graph, so none repeats.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "export/trace.h"
#include "onnx_subset.pb.h"

namespace est::serving {

// The UnimplementedError for a traced node the export cannot write, naming it and saying why
// (a host computation, a lookup, a registry op).
[[noreturn]] void refuse(const TracedNode& node, const std::string& why);

class OnnxEmitter {
 public:
  // `trace` and `other`: the function traced at two batch sizes; the nodes go into `graph`.
  OnnxEmitter(const Trace& trace, const Trace& other, onnx::GraphProto& graph)
      : a_(trace), b_(other), graph_(graph) {}

  const Trace& trace() const { return a_; }
  const Trace& other() const { return b_; }

  // The graph name of value `id` ("" for an absent optional input, id < 0).
  std::string value_name(int id) const;
  // Whether axis `axis` of value `id` differs between the two traces.
  bool dynamic(int id, size_t axis) const {
    return a_.values[id].shape[axis] != b_.values[id].shape[axis];
  }
  const Shape& shape(int id) const { return a_.values[id].shape; }
  DType dtype(int id) const { return a_.values[id].dtype; }

  // Names the trace's inputs by their input names; `set_input_name` names one more value (a
  // lookup's ids, fed as a graph input).
  void set_inputs();
  void set_input_name(int id, const std::string& name) { input_names_[id] = name; }

  // A graph input or output `name` of value `id`'s dtype and shape ("batch" for a dynamic first
  // axis, "<name>_dim<axis>" for another).
  void add_graph_input(const std::string& name, int id) {
    add_value_info(graph_.add_input(), name, id);
  }
  void add_graph_output(const std::string& name, int id) {
    add_value_info(graph_.add_output(), name, id);
  }

  void add_initializer(const std::string& name, const Tensor& value);
  // Initializers made up here: an int64 vector (shapes, axes) and a scalar of `dtype`.
  std::string int64_constant(const std::vector<int64_t>& values);
  std::string scalar_constant(double value, DType dtype);
  // A fresh name "est/<kind>_<n>".
  std::string unique_name(const char* kind) { return fmt::format("est/{}_{}", kind, counter_++); }
  std::string temporary() { return unique_name("tmp"); }

  // A node `op_type` (named "<op_type>_<n>") from `inputs` to `outputs`, and its attributes.
  onnx::NodeProto* add(const std::string& op_type, std::vector<std::string> inputs,
                       std::vector<std::string> outputs);
  static void attribute(onnx::NodeProto* node, const std::string& name, int64_t value);
  static void attribute(onnx::NodeProto* node, const std::string& name,
                        const std::vector<std::string>& values);
  static void attribute(onnx::NodeProto* node, const std::string& name,
                        const std::vector<int64_t>& values);

  // Writes `node` (a registry op or a reshape; lookups: onnx_lookup.h) as ONNX nodes, or
  // refuses it.
  void emit(const TracedNode& node);

  // Whether a node of ONNX's ai.onnx.ml domain (LabelEncoder) was written; its writer says so,
  // and to_onnx then imports the domain.
  void use_ml_domain() { uses_ml_domain_ = true; }
  bool uses_ml_domain() const { return uses_ml_domain_; }

 private:
  void add_value_info(onnx::ValueInfoProto* info, const std::string& name, int id);

  bool uses_ml_domain_ = false;
  const Trace& a_;
  const Trace& b_;
  onnx::GraphProto& graph_;
  std::map<int, std::string> input_names_;
  int counter_ = 0;
};

}  // namespace est::serving
