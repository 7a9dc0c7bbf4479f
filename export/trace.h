// Trace: the ops a function of tensors runs, recorded kernel by kernel, for the ONNX export.
//
// trace() installs a Tracer (an ops::KernelObserver) on the calling thread for the duration of
// one call of the function, so that every kernel the function's ops run is recorded with its
// inputs, outputs and attributes (ops/registry.h explains the observer). Tensors are matched by
// their storage: a kernel's output is a new value; a tensor that shares a known value's storage
// with another shape is that value reshaped (Tensor::reshape makes views without a kernel); a
// tensor never produced by a traced kernel is a constant (a variable, a literal), kept by value.
// Every tensor seen stays alive until the trace ends, so no storage is reused under a name.
// A kernel is recorded from its arguments by their types, so an op the ONNX emitter writes needs
// nothing here. Kernels the export cannot express are still recorded (as unsupported nodes
// naming the op), and so are values that code reports as computed on the host (a feature
// column's vocabulary loop), so that only the ones the outputs depend on are refused, by name
// (onnx_export.h).
// A lookup table a column or head runs (feature_column::report_lookup: vocabulary, hash
// bucket, identity, index to string) is recorded as what it is, a lookup node with its table,
// which the export writes as a pre-processing step or as ONNX ops.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "feature_column/lookup.h"
#include "ops/kernel_ops.h"
#include "ops/tensor.h"

namespace est::serving {

using NamedTensors = std::map<std::string, Tensor>;

struct TracedValue {
  Shape shape;
  DType dtype = DType::kF32;
};

enum class NodeKind : uint8_t {
  kKernel,        // a registry op (op)
  kReshape,       // a view with another shape (no kernel)
  kUnsupported,   // a kernel the export does not express: its outputs are poisoned
  kHostComputed,  // a value computed on the host (ops::report_host_computation): poisoned too
  kLookup,        // a lookup table applied to a value: member indexes Trace::lookups
};

struct TracedNode {
  NodeKind kind = NodeKind::kKernel;
  ops::OpId op = ops::OpId::kFill;
  std::string name;          // the user-visible op ("conv2d", "dense", "argmax")
  std::vector<int> inputs;   // value ids; -1 for an absent optional input (a conv without bias)
  std::vector<int> outputs;  // value ids
  int member = 0;            // the family member: BinaryOp, UnaryOp, CompareOp, ReduceOp, PoolKind
  ops::Activation activation = ops::Activation::kNone;
  std::vector<int64_t> ints;  // axes, perm, slice begin, argmax/softmax/concat/gather axis
  std::vector<double> reals;  // unary parameters
  bool flag_a = false;        // log softmax; matmul transpose_a
  bool flag_b = false;        // matmul transpose_b
  ops::cpu::Window2D window;  // conv2d, pool2d
  bool operator==(const TracedNode& other) const;  // equal but for shapes (window.batch)
};

struct TracedLookup {
  std::string name;  // the column ("color"), or "label_vocabulary"
  feature_column::LookupTable table;
};

struct Trace {
  std::vector<TracedValue> values;
  std::vector<TracedNode> nodes;
  std::map<int, Tensor> constants;            // value id -> its value (a copy)
  std::map<int, std::string> constant_names;  // value id -> variable name, where known
  std::map<std::string, int> inputs;          // input name -> value id
  std::map<std::string, int> outputs;         // output name -> value id
  std::vector<TracedLookup> lookups;          // the tables of the kLookup nodes
};

// Whether the ONNX export writes registry op `id` (its forms are export/onnx_emitter.cpp's
// table, defined there). The tracer records such a kernel's arguments by their types (its
// tensors read, its tensors written, its attributes); any other kernel is an unsupported node.
bool has_onnx_form(ops::OpId id);

// Calls fn(inputs) once with the tracer on, and returns what it ran. `names` names constants
// by their storage (a variable store's variables, so initializers keep their names).
// Exceptions from fn propagate.
Trace trace(const std::function<NamedTensors(const NamedTensors&)>& fn, const NamedTensors& inputs,
            const std::vector<std::pair<std::string, Tensor>>& names = {});

}  // namespace est::serving
