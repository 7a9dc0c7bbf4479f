// Loading model.onnx and interpreting its nodes with est's ops (see onnx_model.h).
//
// load() plans the graph once: every value name becomes a slot (an index), each node knows its
// input and output slots and the slots it reads last, and nodes whose inputs are all constants
// run at load (their outputs join the initializers). run() then walks the remaining nodes over
// a vector of slots. Values are held as PermutedTensor (onnx_layout.h), so the NCHW<->NHWC
// transposes the exporter writes around Conv and the pools cost no copy when they cancel.
#include "export/onnx_model.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "export/onnx_layout.h"
#include "onnx_subset.pb.h"
#include "ops/autograd.h"
#include "ops/cpu/window.h"
#include "ops/ops.h"

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

using Values = std::vector<PermutedTensor>;

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

std::vector<int> as_ints(const std::vector<int64_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

// TF's padding of a window over NCHW input spatial dims (h, w): `same` or `valid`, from the
// explicit pads ONNX holds; UnimplementedError for anything else.
ops::Padding padding_of(const Node& node, const Shape& input, const std::vector<int64_t>& kernel,
                        const std::vector<int64_t>& strides,
                        const std::vector<int64_t>& dilations) {
  std::vector<int64_t> pads = node.ints("pads");
  if (pads.empty()) pads.assign(4, 0);
  if (pads == std::vector<int64_t>(4, 0)) return ops::Padding::kValid;
  for (int axis = 0; axis < 2; ++axis) {
    auto dim = ops::cpu::window_dim(input[2 + axis], kernel[axis], static_cast<int>(strides[axis]),
                                    static_cast<int>(dilations[axis]), ops::Padding::kSame,
                                    node.op_type.c_str());
    if (dim.pad_before != pads[axis] || dim.pad_after != pads[2 + axis])
      throw UnimplementedError(fmt::format(
          "{}: pads [{}] are neither TensorFlow's `same` nor `valid` padding for input {}",
          node.op_type, fmt::join(pads, ", "), ops::shape_str(input)));
  }
  return ops::Padding::kSame;
}

std::array<int, 2> pair_of(const std::vector<int64_t>& values, int fallback) {
  if (values.size() != 2) return {fallback, fallback};
  return {static_cast<int>(values[0]), static_cast<int>(values[1])};
}

// Gather of strings (an index-to-string table), which est's kernels do not copy: rows of a
// 1-D string tensor at int32 or int64 indices of any shape.
Tensor gather_strings(const Tensor& params, const Tensor& indices) {
  if (params.rank() != 1)
    throw UnimplementedError("ONNX Gather of strings: est gathers from 1-D string tensors only");
  const std::vector<std::string> table = params.to_vector<std::string>();
  std::vector<std::string> out;
  for (int64_t index : indices.to_vector<int64_t>()) {
    if (index < 0) index += static_cast<int64_t>(table.size());
    if (index < 0 || index >= static_cast<int64_t>(table.size()))
      throw InvalidArgumentError(
          fmt::format("Gather: index {} is out of range [0, {})", index, table.size()));
    out.push_back(table[static_cast<size_t>(index)]);
  }
  return Tensor::from_vector<std::string>(out, indices.shape());
}

// The ops of contiguous tensors (all but those run_node takes in any layout).
std::vector<Tensor> run_dense(const Node& node, const std::vector<Tensor>& in) {
  const std::string& op = node.op_type;
  auto unary = [&](Tensor (*fn)(const Tensor&)) { return std::vector<Tensor>{fn(in[0])}; };
  auto binary = [&](Tensor (*fn)(const Tensor&, const Tensor&)) {
    return std::vector<Tensor>{fn(in[0], in[1])};
  };
  if (op == "LabelEncoder") {  // ai.onnx.ml: strings to int64, default_int64 for unknown keys
    if (in[0].dtype() != DType::kString)
      throw InvalidArgumentError("LabelEncoder: est maps string keys only");
    Tensor out = Tensor::empty(in[0].shape(), DType::kI64);
    const std::string* keys = in[0].data<std::string>();
    const int64_t fallback = node.attribute("default_int64", -1);
    for (int64_t i = 0; i < in[0].numel(); ++i) {
      auto found = node.label_table->find(keys[i]);
      out.data<int64_t>()[i] = found == node.label_table->end() ? fallback : found->second;
    }
    return {out};
  }
  if (op == "Add") return binary(ops::add);
  if (op == "Sub") return binary(ops::sub);
  if (op == "Mul") return binary(ops::mul);
  if (op == "Div") return binary(ops::div);
  if (op == "Max") return binary(ops::maximum);
  if (op == "Min") return binary(ops::minimum);
  if (op == "Pow") return binary(ops::pow);
  if (op == "Equal") return binary(ops::equal);
  if (op == "Greater") return binary(ops::greater);
  if (op == "Less") return binary(ops::less);
  if (op == "Exp") return unary(ops::exp);
  if (op == "Log") return unary(ops::log);
  if (op == "Sqrt") return unary(ops::sqrt);
  if (op == "Sigmoid") return unary(ops::sigmoid);
  if (op == "Tanh") return unary(ops::tanh);
  if (op == "Clip") return {ops::clip(in[0], in[1].item(), in[2].item())};
  if (op == "Expand") return {ops::broadcast_to(in[0], in[1].to_vector<int64_t>())};
  if (op == "ReduceSum")
    return {ops::sum(in[0], as_ints(in[1].to_vector<int64_t>()), node.attribute("keepdims", 1))};
  if (op == "ReduceMax")
    return {ops::max(in[0], as_ints(node.ints("axes")), node.attribute("keepdims", 1))};
  if (op == "ArgMax") {
    const int axis = static_cast<int>(node.attribute("axis", 0));
    Tensor result = ops::argmax(in[0], axis);
    return {node.attribute("keepdims", 1) ? ops::expand_dims(result, axis) : result};
  }
  if (op == "Concat") return {ops::concat(in, static_cast<int>(node.attribute("axis", 0)))};
  if (op == "Gather" && in[0].dtype() == DType::kString) return {gather_strings(in[0], in[1])};
  if (op == "Gather")
    return {ops::gather(in[0], in[1], static_cast<int>(node.attribute("axis", 0)))};
  if (op == "Softmax") return {ops::softmax(in[0], static_cast<int>(node.attribute("axis", -1)))};
  if (op == "LogSoftmax")
    return {ops::log_softmax(in[0], static_cast<int>(node.attribute("axis", -1)))};
  if (op == "MatMul")
    return binary([](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); });
  if (op == "Reshape") {
    Shape shape = in[1].to_vector<int64_t>();
    for (size_t axis = 0; axis < shape.size(); ++axis)
      if (shape[axis] == 0) shape[axis] = in[0].dim(static_cast<int>(axis));
    return {in[0].reshape(shape)};
  }
  if (op == "Slice") {
    const Shape& shape = in[0].shape();
    std::vector<int64_t> begin(shape.size(), 0), size(shape);
    const auto starts = in[1].to_vector<int64_t>(), ends = in[2].to_vector<int64_t>();
    std::vector<int64_t> axes = in.size() > 3 ? in[3].to_vector<int64_t>() : std::vector<int64_t>{};
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t dim = shape[axes[i]];
      auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
      begin[axes[i]] = clamp(starts[i]);
      size[axes[i]] = std::max<int64_t>(clamp(ends[i]) - begin[axes[i]], 0);
    }
    return {ops::slice(in[0], begin, size)};
  }
  throw UnimplementedError("ONNX op " + op + " is not run by est");
}

const std::vector<int> kNchwToNhwc{0, 2, 3, 1};
const std::vector<int> kNhwcToNchw{0, 3, 1, 2};

// A node's outputs from its inputs. Transpose is lazy; the elementwise ops whose result does
// not depend on where an element sits (Relu, Neg, Abs, Cast: exact in every kernel) map the
// stored tensor and keep its layout; Conv and the pools read their input and weights in
// est's NHWC and HWIO layouts, copy-free when they are held so, and give NHWC back. The rest
// see contiguous tensors.
Values run_node(const Node& node, const Values& in) {
  const std::string& op = node.op_type;
  auto same_layout = [&](Tensor (*fn)(const Tensor&)) {
    return Values{PermutedTensor(fn(in[0].stored), in[0].perm)};
  };
  if (op == "Identity") return {in[0]};
  if (op == "Transpose") return {in[0].lazily_transposed(as_ints(node.ints("perm")))};
  if (op == "Relu") return same_layout(ops::relu);
  if (op == "Neg") return same_layout(ops::neg);
  if (op == "Abs") return same_layout(ops::abs);
  if (op == "Cast") {
    const DType dtype = OnnxModel::dtype_of(static_cast<int>(node.attribute("to", 1)));
    return {PermutedTensor(ops::cast(in[0].stored, dtype), in[0].perm)};
  }
  if (op == "Conv") {
    const Shape weights = in[1].shape();
    const std::vector<int64_t> kernel{weights[2], weights[3]};
    std::vector<int64_t> strides = node.ints("strides"), dilations = node.ints("dilations");
    if (strides.empty()) strides = {1, 1};
    if (dilations.empty()) dilations = {1, 1};
    ops::Conv2DParams params{.strides = pair_of(strides, 1),
                             .padding = padding_of(node, in[0].shape(), kernel, strides, dilations),
                             .dilations = pair_of(dilations, 1)};
    Tensor bias = in.size() > 2 ? in[2].dense() : Tensor();
    return {PermutedTensor(
        ops::conv2d(in[0].transposed(kNchwToNhwc), in[1].transposed({2, 3, 1, 0}), bias, params),
        kNhwcToNchw)};
  }
  if (op == "MaxPool" || op == "AveragePool") {
    const std::vector<int64_t> kernel = node.ints("kernel_shape");
    std::vector<int64_t> strides = node.ints("strides");
    if (strides.empty()) strides = {1, 1};
    ops::Pool2DParams params{.window = pair_of(kernel, 1),
                             .strides = pair_of(strides, 1),
                             .padding = padding_of(node, in[0].shape(), kernel, strides, {1, 1})};
    Tensor x = in[0].transposed(kNchwToNhwc);
    return {PermutedTensor(
        op == "MaxPool" ? ops::max_pool2d(x, params) : ops::avg_pool2d(x, params), kNhwcToNchw)};
  }
  std::vector<Tensor> dense;
  dense.reserve(in.size());
  for (const PermutedTensor& value : in) dense.push_back(value.dense());
  std::vector<Tensor> out = run_dense(node, dense);
  return Values(out.begin(), out.end());
}

// What load() checks about a node before any request: an op est runs, attributes it honours.
void check_supported(const Node& node) {
  static const std::set<std::string> kOps{
      "Identity",    "Cast",        "Add",       "Sub",     "Mul",       "Div",    "Max",
      "Min",         "Pow",         "Equal",     "Greater", "Less",      "Neg",    "Exp",
      "Log",         "Sqrt",        "Abs",       "Relu",    "Sigmoid",   "Tanh",   "Clip",
      "Expand",      "ReduceSum",   "ReduceMax", "ArgMax",  "Transpose", "Concat", "Gather",
      "Softmax",     "LogSoftmax",  "MatMul",    "Reshape", "Slice",     "Conv",   "MaxPool",
      "AveragePool", "LabelEncoder"};
  if (!kOps.count(node.op_type))
    throw UnimplementedError(fmt::format(
        "ONNX op '{}' is not one est runs (est runs the ops its exporter writes)", node.op_type));
  if (node.op_type == "Conv" && node.attribute("group", 1) != 1)
    throw UnimplementedError("ONNX Conv with group != 1 is not run by est");
  if (node.op_type == "AveragePool" && node.attribute("count_include_pad", 0) != 0)
    throw UnimplementedError("ONNX AveragePool with count_include_pad is not run by est");
  if (node.attributes.count("auto_pad"))
    throw UnimplementedError("ONNX " + node.op_type + " with auto_pad is not run by est");
  if (node.op_type == "Slice" && node.inputs.size() > 4)
    throw UnimplementedError("ONNX Slice with steps is not run by est");
  if (node.op_type == "LabelEncoder") {
    for (const auto& [name, attribute] : node.attributes)
      if (name != "keys_strings" && name != "values_int64s" && name != "default_int64")
        throw UnimplementedError("ONNX LabelEncoder with " + name +
                                 " is not run by est (it maps strings to int64)");
    if (!node.attributes.count("keys_strings") || !node.attributes.count("values_int64s") ||
        node.attributes.at("keys_strings").strings.size() !=
            node.attributes.at("values_int64s").ints.size())
      throw UnimplementedError(
          "ONNX LabelEncoder needs keys_strings and values_int64s of one length for est");
  }
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

NamedTensors OnnxModel::run(const NamedTensors& inputs) const {
  ops::NoGradGuard no_grad;
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
