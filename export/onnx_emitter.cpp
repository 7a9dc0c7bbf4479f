// OnnxEmitter (see onnx_emitter.h): the graph-writing members, then the ONNX forms of the
// registry ops, their table (kOnnxForms: one entry per op the export writes) and emit.
// TensorFlow's layouts stay at the graph's edges: Conv and the pools, NCHW in ONNX, are wrapped
// in transposes.
#include "export/onnx_emitter.h"

#include <array>
#include <limits>
#include <map>

#include "export/onnx_export.h"
#include "ops/error.h"
#include "ops/registry.h"

namespace est::serving {

using ops::Activation;
using ops::OpId;

[[noreturn]] void refuse(const TracedNode& node, const std::string& why) {
  if (node.kind == NodeKind::kHostComputed)
    throw UnimplementedError(fmt::format(
        "export: {} is computed on the host, not by ops the export can write as ONNX; keep it "
        "out of the PREDICT path of model_fn (or compute it in the client before the request)",
        node.name));
  if (node.kind == NodeKind::kLookup)
    throw UnimplementedError(fmt::format(
        "export: the lookup of '{}' cannot be exported: {}; look features up in their feature "
        "columns, which read what the serving input receiver gives",
        node.name, why));
  throw UnimplementedError(fmt::format(
      "export: op '{}' (registry op '{}') cannot be exported to ONNX: {}; keep it out of the "
      "PREDICT path of model_fn (or compute it after serving)",
      node.name, node.kind == NodeKind::kReshape ? "reshape" : ops::op_info(node.op).name, why));
}

std::string OnnxEmitter::value_name(int id) const {
  if (id < 0) return "";
  auto input = input_names_.find(id);
  if (input != input_names_.end()) return input->second;
  auto named = a_.constant_names.find(id);
  if (named != a_.constant_names.end()) return named->second;
  return fmt::format("est/value_{}", id);
}

void OnnxEmitter::set_inputs() {
  for (const auto& [name, id] : a_.inputs) input_names_[id] = name;
}

void OnnxEmitter::add_value_info(onnx::ValueInfoProto* info, const std::string& name, int id) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_dtype(a_.values[id].dtype));
  auto* dims = tensor->mutable_shape();
  for (size_t axis = 0; axis < shape(id).size(); ++axis) {
    auto* dim = dims->add_dim();
    if (dynamic(id, axis))
      dim->set_dim_param(axis == 0 ? "batch" : fmt::format("{}_dim{}", name, axis));
    else
      dim->set_dim_value(shape(id)[axis]);
  }
}

void OnnxEmitter::add_initializer(const std::string& name, const Tensor& value) {
  Tensor host = value.to(Device::cpu());
  auto* tensor = graph_.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx_dtype(host.dtype()));
  for (int64_t dim : host.shape()) tensor->add_dims(dim);
  if (host.dtype() == DType::kString) {  // strings are string_data, never raw bytes
    for (int64_t i = 0; i < host.numel(); ++i) tensor->add_string_data(host.data<std::string>()[i]);
    return;
  }
  tensor->set_raw_data(std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
}

std::string OnnxEmitter::int64_constant(const std::vector<int64_t>& values) {
  std::string name = unique_name("shape");
  add_initializer(name, Tensor::from_vector(values));
  return name;
}

std::string OnnxEmitter::scalar_constant(double value, DType dtype) {
  std::string name = unique_name("const");
  add_initializer(name, Tensor::full({}, value, dtype));
  return name;
}

onnx::NodeProto* OnnxEmitter::add(const std::string& op_type, std::vector<std::string> inputs,
                                  std::vector<std::string> outputs) {
  auto* node = graph_.add_node();
  node->set_op_type(op_type);
  node->set_name(fmt::format("{}_{}", op_type, counter_++));
  for (auto& input : inputs) node->add_input(input);
  for (auto& output : outputs) node->add_output(output);
  return node;
}

void OnnxEmitter::attribute(onnx::NodeProto* node, const std::string& name, int64_t value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void OnnxEmitter::attribute(onnx::NodeProto* node, const std::string& name,
                            const std::vector<std::string>& values) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& v : values) a->add_strings(v);
}

void OnnxEmitter::attribute(onnx::NodeProto* node, const std::string& name,
                            const std::vector<int64_t>& values) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

namespace {

// `x` through the fused activation into `output` (an Identity when there is none).
void activation(OnnxEmitter& e, Activation activation, const std::string& x,
                const std::string& output) {
  static const std::map<Activation, const char*> kOnnxOps = {{Activation::kNone, "Identity"},
                                                             {Activation::kRelu, "Relu"},
                                                             {Activation::kSigmoid, "Sigmoid"},
                                                             {Activation::kTanh, "Tanh"}};
  if (auto op = kOnnxOps.find(activation); op != kOnnxOps.end()) e.add(op->second, {x}, {output});
}

std::string to_nchw(OnnxEmitter& e, const std::string& x) {
  std::string out = e.temporary();
  e.attribute(e.add("Transpose", {x}, {out}), "perm", std::vector<int64_t>{0, 3, 1, 2});
  return out;
}

void to_nhwc(OnnxEmitter& e, const std::string& x, const std::string& output) {
  e.attribute(e.add("Transpose", {x}, {output}), "perm", std::vector<int64_t>{0, 2, 3, 1});
}

void window_attributes(OnnxEmitter& e, onnx::NodeProto* node, const ops::cpu::Window2D& w) {
  e.attribute(node, "kernel_shape", std::vector<int64_t>{w.kernel_h, w.kernel_w});
  e.attribute(node, "strides", std::vector<int64_t>{w.stride_h, w.stride_w});
  e.attribute(node, "pads", std::vector<int64_t>{w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
}

// Value `id`, its last two axes swapped when `transpose`.
std::string maybe_transposed(OnnxEmitter& e, int id, bool transpose) {
  if (!transpose) return e.value_name(id);
  std::vector<int64_t> perm;
  for (size_t i = 0; i < e.shape(id).size(); ++i) perm.push_back(static_cast<int64_t>(i));
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  std::string out = e.temporary();
  e.attribute(e.add("Transpose", {e.value_name(id)}, {out}), "perm", perm);
  return out;
}

void emit_reshape(OnnxEmitter& e, const TracedNode& node) {
  const int out_id = node.outputs.at(0);
  std::vector<int64_t> target;
  int dynamic_axes = 0;
  for (size_t axis = 0; axis < e.shape(out_id).size(); ++axis) {
    if (e.dynamic(out_id, axis)) {
      ++dynamic_axes;
      target.push_back(-1);
    } else {
      if (e.shape(out_id)[axis] == 0) refuse(node, "a reshape to an empty dimension");
      target.push_back(e.shape(out_id)[axis]);
    }
  }
  if (dynamic_axes > 1) refuse(node, "a reshape with several batch-dependent dimensions");
  e.add("Reshape", {e.value_name(node.inputs.at(0)), e.int64_constant(target)},
        {e.value_name(out_id)});
}

void emit_unary(OnnxEmitter& e, const TracedNode& node) {
  using ops::UnaryOp;
  // The unary ops that are one ONNX op of the same name and meaning.
  static const std::map<UnaryOp, const char*> kOneOnnxOp = {
      {UnaryOp::kNeg, "Neg"},         {UnaryOp::kExp, "Exp"},  {UnaryOp::kLog, "Log"},
      {UnaryOp::kSqrt, "Sqrt"},       {UnaryOp::kAbs, "Abs"},  {UnaryOp::kRelu, "Relu"},
      {UnaryOp::kSigmoid, "Sigmoid"}, {UnaryOp::kTanh, "Tanh"}};
  const auto op = static_cast<UnaryOp>(node.member);
  const std::string x = e.value_name(node.inputs.at(0));
  const int out_id = node.outputs.at(0);
  const std::string out = e.value_name(out_id);
  const DType type = e.dtype(out_id);
  if (auto same = kOneOnnxOp.find(op); same != kOneOnnxOp.end()) {
    e.add(same->second, {x}, {out});
    return;
  }
  switch (op) {
    case UnaryOp::kSquare:
      e.add("Mul", {x, x}, {out});
      return;
    case UnaryOp::kClip:
      e.add("Clip",
            {x, e.scalar_constant(node.reals[0], type), e.scalar_constant(node.reals[1], type)},
            {out});
      return;
    case UnaryOp::kPow:
      e.add("Pow", {x, e.scalar_constant(node.reals[0], type)}, {out});
      return;
    default:
      break;
  }
  refuse(node, "it has no ONNX form in est's exporter");
}

void emit_slice(OnnxEmitter& e, const TracedNode& node) {
  const int in_id = node.inputs[0], out_id = node.outputs.at(0);
  std::vector<int64_t> ends, axes;
  for (size_t axis = 0; axis < node.ints.size(); ++axis) {
    axes.push_back(static_cast<int64_t>(axis));
    if (e.dynamic(out_id, axis) || e.dynamic(in_id, axis)) {
      if (node.ints[axis] != 0 || e.shape(out_id)[axis] != e.shape(in_id)[axis] ||
          e.other().values[out_id].shape[axis] != e.other().values[in_id].shape[axis])
        refuse(node, "a slice of part of the batch dimension");
      ends.push_back(std::numeric_limits<int64_t>::max());
    } else {
      ends.push_back(node.ints[axis] + e.shape(out_id)[axis]);
    }
  }
  e.add("Slice",
        {e.value_name(in_id), e.int64_constant(node.ints), e.int64_constant(ends),
         e.int64_constant(axes)},
        {e.value_name(out_id)});
}

void emit_matmul(OnnxEmitter& e, const TracedNode& node) {
  std::string product = e.temporary();
  e.add("MatMul",
        {maybe_transposed(e, node.inputs[0], node.flag_a),
         maybe_transposed(e, node.inputs[1], node.flag_b)},
        {product});
  if (node.inputs[2] >= 0) {
    std::string biased = e.temporary();
    e.add("Add", {product, e.value_name(node.inputs[2])}, {biased});
    product = biased;
  }
  activation(e, node.activation, product, e.value_name(node.outputs.at(0)));
}

void emit_conv2d(OnnxEmitter& e, const TracedNode& node) {
  const auto& w = node.window;
  const Shape& kernel = e.shape(node.inputs[1]);  // [KH, KW, IC / groups, OC]
  std::string kernel_oihw = e.temporary();
  e.attribute(e.add("Transpose", {e.value_name(node.inputs[1])}, {kernel_oihw}), "perm",
              std::vector<int64_t>{3, 2, 0, 1});
  std::vector<std::string> inputs{to_nchw(e, e.value_name(node.inputs[0])), kernel_oihw};
  if (node.inputs[2] >= 0) inputs.push_back(e.value_name(node.inputs[2]));
  std::string convolved = e.temporary();
  auto* conv = e.add("Conv", inputs, {convolved});
  window_attributes(e, conv, w);
  e.attribute(conv, "dilations", std::vector<int64_t>{w.dilation_h, w.dilation_w});
  e.attribute(conv, "group", w.in_c / kernel[2]);
  std::string activated = e.temporary();
  activation(e, node.activation, convolved, activated);
  to_nhwc(e, activated, e.value_name(node.outputs.at(0)));
}

void emit_pool2d(OnnxEmitter& e, const TracedNode& node) {
  const bool max = static_cast<ops::PoolKind>(node.member) == ops::PoolKind::kMax;
  std::string pooled = e.temporary();
  auto* pool =
      e.add(max ? "MaxPool" : "AveragePool", {to_nchw(e, e.value_name(node.inputs[0]))}, {pooled});
  window_attributes(e, pool, node.window);
  if (!max) e.attribute(pool, "count_include_pad", 0);  // TF averages the valid inputs only
  to_nhwc(e, pooled, e.value_name(node.outputs.at(0)));
}

// Equal(indices[..., 1], [0, depth)) as the output dtype, scaled to on/off values: exact for
// every index, and out-of-range ones give all off values, as in TF.
void emit_one_hot(OnnxEmitter& e, const TracedNode& node) {
  const int in_id = node.inputs[0], out_id = node.outputs.at(0);
  const DType type = e.dtype(out_id);
  const int64_t depth = e.shape(out_id).back();
  std::vector<int64_t> target;
  for (size_t axis = 0; axis < e.shape(in_id).size(); ++axis)
    target.push_back(e.dynamic(in_id, axis) ? -1 : e.shape(in_id)[axis]);
  target.push_back(1);
  std::string ids = e.temporary(), column = e.temporary(), hot = e.temporary();
  std::string scaled = e.temporary();
  e.attribute(e.add("Cast", {e.value_name(in_id)}, {ids}), "to", onnx_dtype(DType::kI64));
  e.add("Reshape", {ids, e.int64_constant(target)}, {column});
  std::vector<int64_t> range(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i) range[static_cast<size_t>(i)] = i;
  std::string equal = e.temporary();
  e.add("Equal", {column, e.int64_constant(range)}, {equal});
  e.attribute(e.add("Cast", {equal}, {hot}), "to", onnx_dtype(type));
  e.add("Mul", {hot, e.scalar_constant(node.reals[0] - node.reals[1], type)}, {scaled});
  e.add("Add", {scaled, e.scalar_constant(node.reals[1], type)}, {e.value_name(out_id)});
}

// Inference with the moving statistics, over the last axis (est's NHWC / [N, C]):
// (x - mean) / sqrt(variance + epsilon) * gamma + beta, each a broadcast over channels.
void emit_batch_norm(OnnxEmitter& e, const TracedNode& node) {
  auto in = [&](size_t i) { return e.value_name(node.inputs.at(i)); };
  const int out_id = node.outputs.at(0);
  const std::string out = e.value_name(out_id);
  std::string shifted = e.temporary(), stddev = e.temporary(), variance = e.temporary();
  std::string normalized = e.temporary();
  e.add("Sub", {in(0), in(3)}, {shifted});
  e.add("Add", {in(4), e.scalar_constant(node.reals[0], e.dtype(out_id))}, {variance});
  e.add("Sqrt", {variance}, {stddev});
  e.add("Div", {shifted, stddev}, {normalized});
  if (node.inputs[1] >= 0) {
    std::string scaled = e.temporary();
    e.add("Mul", {normalized, in(1)}, {scaled});
    normalized = scaled;
  }
  if (node.inputs[2] >= 0) {
    e.add("Add", {normalized, in(2)}, {out});
  } else {
    e.add("Identity", {normalized}, {out});
  }
}

std::string in(OnnxEmitter& e, const TracedNode& node, size_t i) {
  return e.value_name(node.inputs.at(i));
}
std::string out(OnnxEmitter& e, const TracedNode& node) { return e.value_name(node.outputs.at(0)); }

void emit_binary(OnnxEmitter& e, const TracedNode& node) {
  static const char* const kTypes[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  const auto op = static_cast<ops::BinaryOp>(node.member);
  if (op == ops::BinaryOp::kDiv && !is_floating(e.dtype(node.outputs.at(0))))
    refuse(node, "integer division (ONNX rounds differently)");
  if (op == ops::BinaryOp::kSquaredDifference) {
    std::string difference = e.temporary();
    e.add("Sub", {in(e, node, 0), in(e, node, 1)}, {difference});
    e.add("Mul", {difference, difference}, {out(e, node)});
  } else {
    e.add(kTypes[node.member], {in(e, node, 0), in(e, node, 1)}, {out(e, node)});
  }
}

void emit_broadcast_to(OnnxEmitter& e, const TracedNode& node) {
  const int out_id = node.outputs.at(0);
  for (size_t axis = 0; axis < e.shape(out_id).size(); ++axis)
    if (e.dynamic(out_id, axis)) refuse(node, "a broadcast to a batch-dependent shape");
  e.add("Expand", {in(e, node, 0), e.int64_constant(e.shape(out_id))}, {out(e, node)});
}

void emit_reduce(OnnxEmitter& e, const TracedNode& node) {
  if (node.ints.empty()) {
    e.add("Identity", {in(e, node, 0)}, {out(e, node)});
  } else if (static_cast<ops::ReduceOp>(node.member) == ops::ReduceOp::kSum) {
    e.attribute(e.add("ReduceSum", {in(e, node, 0), e.int64_constant(node.ints)}, {out(e, node)}),
                "keepdims", 0);
  } else {
    auto* reduce = e.add("ReduceMax", {in(e, node, 0)}, {out(e, node)});
    e.attribute(reduce, "axes", node.ints);
    e.attribute(reduce, "keepdims", 0);
  }
}

void emit_concat(OnnxEmitter& e, const TracedNode& node) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i) inputs.push_back(in(e, node, i));
  e.attribute(e.add("Concat", inputs, {out(e, node)}), "axis", node.ints[0]);
}

using OnnxForm = void (*)(OnnxEmitter&, const TracedNode&);
using Node = const TracedNode&;

// The ONNX form of each registry op the export writes, by OpId; null where there is none (the
// tracer records those kernels as unsupported nodes, has_onnx_form). A new op's form goes here.
constexpr std::array<OnnxForm, ops::kNumOpIds> kOnnxForms = [] {
  std::array<OnnxForm, ops::kNumOpIds> forms{};
  auto set = [&forms](OpId id, OnnxForm form) { forms[static_cast<size_t>(id)] = form; };
  set(OpId::kCopy, [](OnnxEmitter& e, Node n) { e.add("Identity", {in(e, n, 0)}, {out(e, n)}); });
  set(OpId::kCast, [](OnnxEmitter& e, Node n) {
    e.attribute(e.add("Cast", {in(e, n, 0)}, {out(e, n)}), "to",
                onnx_dtype(e.dtype(n.outputs.at(0))));
  });
  set(OpId::kBinary, emit_binary);
  set(OpId::kCompare, [](OnnxEmitter& e, Node n) {
    static const char* const kTypes[] = {"Equal", "Greater", "Less"};
    e.add(kTypes[n.member], {in(e, n, 0), in(e, n, 1)}, {out(e, n)});
  });
  set(OpId::kUnary, emit_unary);
  set(OpId::kBroadcastTo, emit_broadcast_to);
  set(OpId::kReduce, emit_reduce);
  set(OpId::kArgmax, [](OnnxEmitter& e, Node n) {
    auto* argmax = e.add("ArgMax", {in(e, n, 0)}, {out(e, n)});
    e.attribute(argmax, "axis", n.ints[0]);
    e.attribute(argmax, "keepdims", 0);
  });
  set(OpId::kTranspose, [](OnnxEmitter& e, Node n) {
    e.attribute(e.add("Transpose", {in(e, n, 0)}, {out(e, n)}), "perm", n.ints);
  });
  set(OpId::kConcat, emit_concat);
  set(OpId::kSlice, emit_slice);
  set(OpId::kGather, [](OnnxEmitter& e, Node n) {
    e.attribute(e.add("Gather", {in(e, n, 0), in(e, n, 1)}, {out(e, n)}), "axis", n.ints[0]);
  });
  set(OpId::kSoftmax, [](OnnxEmitter& e, Node n) {
    e.attribute(e.add(n.flag_a ? "LogSoftmax" : "Softmax", {in(e, n, 0)}, {out(e, n)}), "axis",
                n.ints[0]);
  });
  set(OpId::kMatmul, emit_matmul);
  set(OpId::kBiasAdd, [](OnnxEmitter& e, Node n) {
    e.add("Add", {in(e, n, 0), in(e, n, 1)}, {out(e, n)});
  });
  set(OpId::kActivation,
      [](OnnxEmitter& e, Node n) { activation(e, n.activation, in(e, n, 0), out(e, n)); });
  set(OpId::kConv2D, emit_conv2d);
  set(OpId::kPool2D, emit_pool2d);
  set(OpId::kOneHot, emit_one_hot);
  set(OpId::kBatchNorm, emit_batch_norm);
  return forms;
}();

}  // namespace

bool has_onnx_form(OpId id) {
  const auto index = static_cast<size_t>(id);
  return index < kOnnxForms.size() && kOnnxForms[index] != nullptr;
}

void OnnxEmitter::emit(const TracedNode& node) {
  if (node.kind == NodeKind::kReshape) return emit_reshape(*this, node);
  if (has_onnx_form(node.op)) return kOnnxForms[static_cast<size_t>(node.op)](*this, node);
  refuse(node, "it has no ONNX form in est's exporter");
}

}  // namespace est::serving
