// Loading model.onnx and interpreting its nodes with est's ops (see onnx_model.h).
//
// load() plans the graph once: every value name becomes a slot (an index), each node knows its
// input and output slots and the slots it reads last, and nodes whose inputs are all constants
// run at load (their outputs join the initializers). run() then walks the remaining nodes over
// a vector of slots. Values are held as PermutedTensor (onnx_layout.h), so the NCHW<->NHWC
// transposes the exporter writes around Conv and the pools cost no copy when they cancel.
#include "export/onnx_model.h"

#include <cstring>
#include <fstream>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "export/onnx_nodes.h"
#include "onnx_subset.pb.h"
#include "ops/autograd.h"
#include "ops/ops.h"

namespace est::serving {

struct OnnxModel::Graph {
  std::vector<Node> nodes;  // those left to run per request, in the file's order
  // By slot: the initializers and the outputs of the nodes folded at load; the rest undefined.
  std::vector<PermutedTensor> constants;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<int> input_slots;   // of inputs[i]
  std::vector<int> output_slots;  // of outputs[i]
};

namespace {

Tensor tensor_of(const onnx::TensorProto& proto) {
  const DType dtype = OnnxModel::dtype_of(proto.data_type());
  Shape shape(proto.dims().begin(), proto.dims().end());
  if (dtype == DType::kString) {
    if (proto.string_data_size() != ops::num_elements(shape))
      throw DataLossError(fmt::format("ONNX initializer '{}' has {} strings for shape {}",
                                      proto.name(), proto.string_data_size(),
                                      ops::shape_str(shape)));
    return Tensor::from_vector<std::string>(
        {proto.string_data().begin(), proto.string_data().end()}, shape);
  }
  Tensor tensor = Tensor::empty(shape, dtype);
  const size_t bytes = tensor.nbytes();
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      throw DataLossError(fmt::format("ONNX initializer '{}' holds {} bytes, its shape {} needs {}",
                                      proto.name(), proto.raw_data().size(), ops::shape_str(shape),
                                      bytes));
    std::memcpy(tensor.raw_data(), proto.raw_data().data(), bytes);
    return tensor;
  }
  auto fill = [&](const auto& values) {
    if (static_cast<int64_t>(values.size()) != tensor.numel())
      throw DataLossError(fmt::format("ONNX initializer '{}' has {} values for shape {}",
                                      proto.name(), values.size(), ops::shape_str(shape)));
    std::vector<double> all(values.begin(), values.end());
    Tensor from = Tensor::from_vector(all, shape);
    tensor = ops::cast(from, dtype);
  };
  if (proto.float_data_size() > 0)
    fill(proto.float_data());
  else if (proto.int64_data_size() > 0)
    fill(proto.int64_data());
  else if (proto.int32_data_size() > 0)
    fill(proto.int32_data());
  else if (proto.double_data_size() > 0)
    fill(proto.double_data());
  else if (tensor.numel() > 0)
    throw DataLossError(fmt::format("ONNX initializer '{}' has no data", proto.name()));
  return tensor;
}

TensorInfo info_of(const onnx::ValueInfoProto& value) {
  TensorInfo info{.name = value.name()};
  const auto& type = value.type().tensor_type();
  info.dtype = OnnxModel::dtype_of(type.elem_type());
  for (const auto& dim : type.shape().dim())
    info.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  return info;
}

// Runs a node whose inputs are all constants, at load: its outputs become constants. False
// (the node stays, to fail at run as it would have) when it throws.
bool fold(const Node& node, Values& constants) {
  Values in;
  for (int slot : node.input_slots)
    if (slot >= 0) in.push_back(constants[static_cast<size_t>(slot)]);
  Values out;
  try {
    out = run_node(node, in);
  } catch (const Error&) {
    return false;
  }
  for (size_t i = 0; i < node.output_slots.size() && i < out.size(); ++i)
    constants[static_cast<size_t>(node.output_slots[i])] = std::move(out[i]);
  return true;
}

// A Conv followed by a Relu that alone reads its output becomes one node, the relu fused in the
// conv2d (one pass over the output, not two).
std::vector<Node> fuse_conv_relu(std::vector<Node> nodes, const std::vector<int>& graph_outputs,
                                 size_t slot_count) {
  std::vector<int> readers(slot_count, 0);
  for (const Node& node : nodes)
    for (int slot : node.input_slots)
      if (slot >= 0) ++readers[static_cast<size_t>(slot)];
  for (int slot : graph_outputs) ++readers[static_cast<size_t>(slot)];
  std::vector<Node> fused;
  for (size_t n = 0; n < nodes.size(); ++n) {
    Node& node = nodes[n];
    if (node.op_type == "Conv" && n + 1 < nodes.size() && nodes[n + 1].op_type == "Relu" &&
        node.output_slots.size() == 1 && nodes[n + 1].input_slots == node.output_slots &&
        nodes[n + 1].output_slots.size() == 1 &&
        readers[static_cast<size_t>(node.output_slots[0])] == 1) {
      node.relu_fused = true;
      node.outputs = nodes[n + 1].outputs;
      node.output_slots = nodes[n + 1].output_slots;
      ++n;
    }
    fused.push_back(std::move(node));
  }
  return fused;
}

// Gives every value name a slot, folds the nodes of constants (a node folds only when its
// outputs are names nothing before it wrote, so what run() sees stays as in the file's order),
// and lists after which node each slot is read for the last time.
void plan(OnnxModel::Graph& graph, const std::map<std::string, Tensor>& initializers) {
  ops::NoGradGuard no_grad;
  std::unordered_map<std::string, int> slots;
  std::vector<bool> varying;  // written per request: a graph input or a node left to run
  auto slot_of = [&](const std::string& name) {
    auto [found, added] = slots.emplace(name, static_cast<int>(slots.size()));
    if (added) {
      graph.constants.emplace_back();
      varying.push_back(false);
    }
    return found->second;
  };
  for (const auto& [name, tensor] : initializers) {
    const int slot = slot_of(name);
    graph.constants[static_cast<size_t>(slot)] = tensor;
  }
  for (const TensorInfo& info : graph.inputs) {
    graph.input_slots.push_back(slot_of(info.name));
    varying[static_cast<size_t>(graph.input_slots.back())] = true;
  }
  std::vector<Node> kept;
  for (Node& node : graph.nodes) {
    bool foldable = true;
    for (const std::string& name : node.inputs) {
      node.input_slots.push_back(name.empty() ? -1 : slot_of(name));
      const auto slot = static_cast<size_t>(node.input_slots.back());
      if (!name.empty() && (varying[slot] || !graph.constants[slot].defined())) foldable = false;
    }
    for (const std::string& name : node.outputs) {
      if (slots.count(name)) foldable = false;
      node.output_slots.push_back(slot_of(name));
    }
    if (foldable && fold(node, graph.constants)) continue;
    for (int slot : node.output_slots) varying[static_cast<size_t>(slot)] = true;
    kept.push_back(std::move(node));
  }
  for (const TensorInfo& info : graph.outputs) graph.output_slots.push_back(slot_of(info.name));
  kept = fuse_conv_relu(std::move(kept), graph.output_slots, graph.constants.size());
  std::vector<size_t> last_reader(graph.constants.size(), kept.size());
  for (size_t n = 0; n < kept.size(); ++n)
    for (int slot : kept[n].input_slots)
      if (slot >= 0) last_reader[static_cast<size_t>(slot)] = n;
  for (int slot : graph.output_slots) last_reader[static_cast<size_t>(slot)] = kept.size();
  for (size_t slot = 0; slot < last_reader.size(); ++slot)
    if (last_reader[slot] < kept.size())
      kept[last_reader[slot]].last_reads.push_back(static_cast<int>(slot));
  graph.nodes = std::move(kept);
}

}  // namespace

DType OnnxModel::dtype_of(int onnx_dtype) {
  switch (onnx_dtype) {
    case onnx::TensorProto::FLOAT:
      return DType::kF32;
    case onnx::TensorProto::DOUBLE:
      return DType::kF64;
    case onnx::TensorProto::INT32:
      return DType::kI32;
    case onnx::TensorProto::INT64:
      return DType::kI64;
    case onnx::TensorProto::UINT8:
      return DType::kU8;
    case onnx::TensorProto::BOOL:
      return DType::kBool;
    case onnx::TensorProto::BFLOAT16:
      return DType::kBF16;
    case onnx::TensorProto::STRING:
      return DType::kString;
    default:
      throw UnimplementedError(fmt::format("ONNX data type {} has no est dtype", onnx_dtype));
  }
}

OnnxModel OnnxModel::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NotFoundError("OnnxModel: cannot open " + path);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&file) || !model.has_graph())
    throw DataLossError("OnnxModel: " + path + " is not an ONNX model (no ModelProto parses)");
  auto graph = std::make_shared<Graph>();
  std::map<std::string, Tensor> initializers;
  for (const auto& initializer : model.graph().initializer())
    initializers[initializer.name()] = tensor_of(initializer);
  for (const auto& input : model.graph().input())
    if (!initializers.count(input.name())) graph->inputs.push_back(info_of(input));
  for (const auto& output : model.graph().output()) graph->outputs.push_back(info_of(output));
  for (const auto& proto : model.graph().node()) {
    Node node{.op_type = proto.op_type(),
              .inputs = {proto.input().begin(), proto.input().end()},
              .outputs = {proto.output().begin(), proto.output().end()}};
    for (const auto& attribute : proto.attribute())
      node.attributes[attribute.name()] = {
          attribute.i(),
          {attribute.ints().begin(), attribute.ints().end()},
          {attribute.strings().begin(), attribute.strings().end()}};
    const bool ml = proto.domain() == "ai.onnx.ml" && proto.op_type() == "LabelEncoder";
    if (!proto.domain().empty() && !ml)
      throw UnimplementedError("OnnxModel: " + path + ": op " + proto.op_type() + " of domain '" +
                               proto.domain() + "' is not run by est");
    try {
      check_supported(node);
    } catch (const UnimplementedError& error) {
      throw UnimplementedError(path + ": " + error.what());
    }
    if (node.op_type == "LabelEncoder") {
      auto table = std::make_shared<std::unordered_map<std::string, int64_t>>();
      const auto& keys = node.attributes.at("keys_strings").strings;
      const auto& values = node.attributes.at("values_int64s").ints;
      for (size_t i = 0; i < keys.size(); ++i) table->emplace(keys[i], values[i]);
      node.label_table = std::move(table);
    }
    graph->nodes.push_back(std::move(node));
  }
  plan(*graph, initializers);
  return OnnxModel(std::move(graph));
}

const std::vector<TensorInfo>& OnnxModel::inputs() const { return graph_->inputs; }
const std::vector<TensorInfo>& OnnxModel::outputs() const { return graph_->outputs; }

namespace {

// A request of at most this many input elements (a few images of the tutorial CNN) runs its
// kernels on the calling thread: at batch 1 a two-thread OpenMP team per kernel made the CNN's
// run 4x slower on shared cores (0.21-0.26 ms against 0.05, bench/README.md), and est-serve
// runs requests on several threads at once anyway. Larger ones keep the kernels' own split.
constexpr int64_t kSerialRequestElements = int64_t{1} << 14;

// set_num_threads(1) on the calling thread for the scope's lifetime when `serial`.
class SerialRequest {
 public:
  explicit SerialRequest(bool serial) : previous_(serial ? ops::num_threads() : 0) {
    if (previous_ > 1) ops::set_num_threads(1);
  }
  ~SerialRequest() {
    if (previous_ > 1) ops::set_num_threads(previous_);
  }
  SerialRequest(const SerialRequest&) = delete;
  SerialRequest& operator=(const SerialRequest&) = delete;

 private:
  int previous_;
};

}  // namespace

NamedTensors OnnxModel::run(const NamedTensors& inputs) const {
  ops::NoGradGuard no_grad;
  int64_t elements = 0;
  for (const auto& [name, tensor] : inputs) elements += tensor.numel();
  const SerialRequest serial(elements <= kSerialRequestElements);
  Values values = graph_->constants;
  for (size_t i = 0; i < graph_->inputs.size(); ++i) {
    const TensorInfo& info = graph_->inputs[i];
    auto found = inputs.find(info.name);
    if (found == inputs.end())
      throw InvalidArgumentError(fmt::format("input '{}' is missing", info.name));
    const Tensor& tensor = found->second;
    if (tensor.dtype() != info.dtype)
      throw InvalidArgumentError(fmt::format("input '{}' must be {}, got {}", info.name,
                                             dtype_name(info.dtype), dtype_name(tensor.dtype())));
    bool fits = tensor.rank() == static_cast<int>(info.shape.size());
    for (size_t axis = 0; fits && axis < info.shape.size(); ++axis)
      fits = info.shape[axis] < 0 || info.shape[axis] == tensor.shape()[axis];
    if (!fits)
      throw InvalidArgumentError(fmt::format("input '{}' must have shape {} (-1: any), got {}",
                                             info.name, ops::shape_str(info.shape),
                                             ops::shape_str(tensor.shape())));
    values[static_cast<size_t>(graph_->input_slots[i])] = tensor;
  }
  Values in;
  for (const Node& node : graph_->nodes) {
    in.clear();
    for (size_t i = 0; i < node.input_slots.size(); ++i) {
      const int slot = node.input_slots[i];
      if (slot < 0) continue;
      if (!values[static_cast<size_t>(slot)].defined())
        throw InvalidArgumentError(fmt::format("ONNX node {} reads '{}', which no node wrote",
                                               node.op_type, node.inputs[i]));
      in.push_back(values[static_cast<size_t>(slot)]);
    }
    for (int slot : node.last_reads) values[static_cast<size_t>(slot)] = PermutedTensor();
    Values out = run_node(node, in);
    for (size_t i = 0; i < node.output_slots.size() && i < out.size(); ++i)
      values[static_cast<size_t>(node.output_slots[i])] = std::move(out[i]);
  }
  NamedTensors outputs;
  for (size_t i = 0; i < graph_->outputs.size(); ++i) {
    const PermutedTensor& value = values[static_cast<size_t>(graph_->output_slots[i])];
    if (!value.defined())
      throw InvalidArgumentError(
          fmt::format("ONNX graph output '{}' is written by no node", graph_->outputs[i].name));
    outputs[graph_->outputs[i].name] = value.dense();
  }
  return outputs;
}

}  // namespace est::serving
