// Node: one node of a loaded ONNX graph, and run_node, which runs it with est's ops: the
// interpreter's op set (onnx_model.h says which ops and attributes; check_supported refuses
// the others at load). Apart from onnx_model.cpp, which plans and walks the graph, so that each
// file stays one concern.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "export/onnx_layout.h"

namespace est::serving {

struct Attribute {
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string op_type;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // Slots of inputs and outputs (-1: an omitted input, which the op does not see), and the
  // slots no later node reads, freed once this node has run.
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  std::vector<int> last_reads;
  // A Conv whose output only a Relu read: the relu runs fused in the conv (plan() in
  // onnx_model.cpp), as est's own conv2d layers run it, and the node writes the Relu's output.
  bool relu_fused = false;
  std::map<std::string, Attribute> attributes;
  // LabelEncoder's keys_strings -> values_int64s, built once at load.
  std::shared_ptr<const std::unordered_map<std::string, int64_t>> label_table;

  int64_t attribute(const std::string& name, int64_t fallback) const {
    auto found = attributes.find(name);
    return found == attributes.end() ? fallback : found->second.i;
  }
  std::vector<int64_t> ints(const std::string& name) const {
    auto found = attributes.find(name);
    return found == attributes.end() ? std::vector<int64_t>{} : found->second.ints;
  }
};

using Values = std::vector<PermutedTensor>;

// A node's outputs from its inputs (those of its inputs that are not omitted, in order).
Values run_node(const Node& node, const Values& in);

// What load() checks about a node before any request: an op est runs, attributes it honours
// (UnimplementedError naming them otherwise).
void check_supported(const Node& node);

}  // namespace est::serving
