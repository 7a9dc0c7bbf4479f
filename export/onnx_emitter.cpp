// OnnxEmitter (see onnx_emitter.h): the graph-writing helpers, then emit, one case per registry
// op, with the ops that take several ONNX nodes in their own functions below it. TensorFlow's
// layouts stay at the graph's edges: Conv and the pools, NCHW in ONNX, are wrapped in transposes.
#include "export/onnx_emitter.h"

#include <limits>

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

void OnnxEmitter::activation(Activation activation, const std::string& x,
                             const std::string& output) {
  switch (activation) {
    case Activation::kNone:
      add("Identity", {x}, {output});
      return;
    case Activation::kRelu:
      add("Relu", {x}, {output});
      return;
    case Activation::kSigmoid:
      add("Sigmoid", {x}, {output});
      return;
    case Activation::kTanh:
      add("Tanh", {x}, {output});
      return;
  }
}

std::string OnnxEmitter::to_nchw(const std::string& x) {
  std::string out = temporary();
  attribute(add("Transpose", {x}, {out}), "perm", std::vector<int64_t>{0, 3, 1, 2});
  return out;
}

void OnnxEmitter::to_nhwc(const std::string& x, const std::string& output) {
  attribute(add("Transpose", {x}, {output}), "perm", std::vector<int64_t>{0, 2, 3, 1});
}

void OnnxEmitter::window_attributes(onnx::NodeProto* node, const ops::cpu::Window2D& w) {
  attribute(node, "kernel_shape", std::vector<int64_t>{w.kernel_h, w.kernel_w});
  attribute(node, "strides", std::vector<int64_t>{w.stride_h, w.stride_w});
  attribute(node, "pads", std::vector<int64_t>{w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
}

std::string OnnxEmitter::maybe_transposed(int id, bool transpose) {
  if (!transpose) return value_name(id);
  std::vector<int64_t> perm;
  for (size_t i = 0; i < shape(id).size(); ++i) perm.push_back(static_cast<int64_t>(i));
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  std::string out = temporary();
  attribute(add("Transpose", {value_name(id)}, {out}), "perm", perm);
  return out;
}
void OnnxEmitter::emit(const TracedNode& node) {
  auto in = [&](size_t i) { return value_name(node.inputs.at(i)); };
  const int out_id = node.outputs.at(0);
  const std::string out = value_name(out_id);
  if (node.kind == NodeKind::kReshape) return emit_reshape(node);
  switch (node.op) {
    case OpId::kCopy:
      add("Identity", {in(0)}, {out});
      return;
    case OpId::kCast:
      attribute(add("Cast", {in(0)}, {out}), "to", onnx_dtype(dtype(out_id)));
      return;
    case OpId::kBinary: {
      static const char* const kTypes[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
      const auto op = static_cast<ops::BinaryOp>(node.member);
      if (op == ops::BinaryOp::kDiv && !is_floating(dtype(out_id)))
        refuse(node, "integer division (ONNX rounds differently)");
      if (op == ops::BinaryOp::kSquaredDifference) {
        std::string difference = temporary();
        add("Sub", {in(0), in(1)}, {difference});
        add("Mul", {difference, difference}, {out});
      } else {
        add(kTypes[node.member], {in(0), in(1)}, {out});
      }
      return;
    }
    case OpId::kCompare: {
      static const char* const kTypes[] = {"Equal", "Greater", "Less"};
      add(kTypes[node.member], {in(0), in(1)}, {out});
      return;
    }
    case OpId::kUnary:
      return emit_unary(node);
    case OpId::kBroadcastTo:
      for (size_t axis = 0; axis < shape(out_id).size(); ++axis)
        if (dynamic(out_id, axis)) refuse(node, "a broadcast to a batch-dependent shape");
      add("Expand", {in(0), int64_constant(shape(out_id))}, {out});
      return;
    case OpId::kReduce: {
      if (node.ints.empty()) {
        add("Identity", {in(0)}, {out});
        return;
      }
      if (static_cast<ops::ReduceOp>(node.member) == ops::ReduceOp::kSum) {
        attribute(add("ReduceSum", {in(0), int64_constant(node.ints)}, {out}), "keepdims", 0);
      } else {
        auto* reduce = add("ReduceMax", {in(0)}, {out});
        attribute(reduce, "axes", node.ints);
        attribute(reduce, "keepdims", 0);
      }
      return;
    }
    case OpId::kArgmax: {
      auto* argmax = add("ArgMax", {in(0)}, {out});
      attribute(argmax, "axis", node.ints[0]);
      attribute(argmax, "keepdims", 0);
      return;
    }
    case OpId::kTranspose:
      attribute(add("Transpose", {in(0)}, {out}), "perm", node.ints);
      return;
    case OpId::kConcat: {
      std::vector<std::string> inputs;
      for (size_t i = 0; i < node.inputs.size(); ++i) inputs.push_back(in(i));
      attribute(add("Concat", inputs, {out}), "axis", node.ints[0]);
      return;
    }
    case OpId::kSlice:
      return emit_slice(node);
    case OpId::kGather:
      attribute(add("Gather", {in(0), in(1)}, {out}), "axis", node.ints[0]);
      return;
    case OpId::kSoftmax:
      attribute(add(node.flag_a ? "LogSoftmax" : "Softmax", {in(0)}, {out}), "axis", node.ints[0]);
      return;
    case OpId::kMatmul:
      return emit_matmul(node);
    case OpId::kBiasAdd:
      add("Add", {in(0), in(1)}, {out});
      return;
    case OpId::kActivation:
      activation(node.activation, in(0), out);
      return;
    case OpId::kConv2D:
      return emit_conv2d(node);
    case OpId::kPool2D:
      return emit_pool2d(node);
    case OpId::kOneHot:
      return emit_one_hot(node);
    case OpId::kBatchNorm:
      return emit_batch_norm(node);
    default:
      break;
  }
  refuse(node, "it has no ONNX form in est's exporter");
}

void OnnxEmitter::emit_reshape(const TracedNode& node) {
  const int out_id = node.outputs.at(0);
  std::vector<int64_t> target;
  int dynamic_axes = 0;
  for (size_t axis = 0; axis < shape(out_id).size(); ++axis) {
    if (dynamic(out_id, axis)) {
      ++dynamic_axes;
      target.push_back(-1);
    } else {
      if (shape(out_id)[axis] == 0) refuse(node, "a reshape to an empty dimension");
      target.push_back(shape(out_id)[axis]);
    }
  }
  if (dynamic_axes > 1) refuse(node, "a reshape with several batch-dependent dimensions");
  add("Reshape", {value_name(node.inputs.at(0)), int64_constant(target)}, {value_name(out_id)});
}

void OnnxEmitter::emit_unary(const TracedNode& node) {
  const std::string x = value_name(node.inputs.at(0));
  const int out_id = node.outputs.at(0);
  const std::string out = value_name(out_id);
  const DType type = dtype(out_id);
  switch (static_cast<ops::UnaryOp>(node.member)) {
    case ops::UnaryOp::kNeg:
      add("Neg", {x}, {out});
      return;
    case ops::UnaryOp::kExp:
      add("Exp", {x}, {out});
      return;
    case ops::UnaryOp::kLog:
      add("Log", {x}, {out});
      return;
    case ops::UnaryOp::kSqrt:
      add("Sqrt", {x}, {out});
      return;
    case ops::UnaryOp::kSquare:
      add("Mul", {x, x}, {out});
      return;
    case ops::UnaryOp::kAbs:
      add("Abs", {x}, {out});
      return;
    case ops::UnaryOp::kRelu:
      add("Relu", {x}, {out});
      return;
    case ops::UnaryOp::kSigmoid:
      add("Sigmoid", {x}, {out});
      return;
    case ops::UnaryOp::kTanh:
      add("Tanh", {x}, {out});
      return;
    case ops::UnaryOp::kClip:
      add("Clip", {x, scalar_constant(node.reals[0], type), scalar_constant(node.reals[1], type)},
          {out});
      return;
    case ops::UnaryOp::kPow:
      add("Pow", {x, scalar_constant(node.reals[0], type)}, {out});
      return;
  }
  refuse(node, "it has no ONNX form in est's exporter");
}

void OnnxEmitter::emit_slice(const TracedNode& node) {
  const int in_id = node.inputs[0], out_id = node.outputs.at(0);
  std::vector<int64_t> ends, axes;
  for (size_t axis = 0; axis < node.ints.size(); ++axis) {
    axes.push_back(static_cast<int64_t>(axis));
    if (dynamic(out_id, axis) || dynamic(in_id, axis)) {
      if (node.ints[axis] != 0 || shape(out_id)[axis] != shape(in_id)[axis] ||
          b_.values[out_id].shape[axis] != b_.values[in_id].shape[axis])
        refuse(node, "a slice of part of the batch dimension");
      ends.push_back(std::numeric_limits<int64_t>::max());
    } else {
      ends.push_back(node.ints[axis] + shape(out_id)[axis]);
    }
  }
  add("Slice",
      {value_name(in_id), int64_constant(node.ints), int64_constant(ends), int64_constant(axes)},
      {value_name(out_id)});
}

void OnnxEmitter::emit_matmul(const TracedNode& node) {
  std::string product = temporary();
  add("MatMul",
      {maybe_transposed(node.inputs[0], node.flag_a),
       maybe_transposed(node.inputs[1], node.flag_b)},
      {product});
  if (node.inputs[2] >= 0) {
    std::string biased = temporary();
    add("Add", {product, value_name(node.inputs[2])}, {biased});
    product = biased;
  }
  activation(node.activation, product, value_name(node.outputs.at(0)));
}

void OnnxEmitter::emit_conv2d(const TracedNode& node) {
  const auto& w = node.window;
  const Shape& kernel = shape(node.inputs[1]);  // [KH, KW, IC / groups, OC]
  std::string kernel_oihw = temporary();
  attribute(add("Transpose", {value_name(node.inputs[1])}, {kernel_oihw}), "perm",
            std::vector<int64_t>{3, 2, 0, 1});
  std::vector<std::string> inputs{to_nchw(value_name(node.inputs[0])), kernel_oihw};
  if (node.inputs[2] >= 0) inputs.push_back(value_name(node.inputs[2]));
  std::string convolved = temporary();
  auto* conv = add("Conv", inputs, {convolved});
  window_attributes(conv, w);
  attribute(conv, "dilations", std::vector<int64_t>{w.dilation_h, w.dilation_w});
  attribute(conv, "group", w.in_c / kernel[2]);
  std::string activated = temporary();
  activation(node.activation, convolved, activated);
  to_nhwc(activated, value_name(node.outputs.at(0)));
}

void OnnxEmitter::emit_pool2d(const TracedNode& node) {
  const bool max = static_cast<ops::PoolKind>(node.member) == ops::PoolKind::kMax;
  std::string pooled = temporary();
  auto* pool =
      add(max ? "MaxPool" : "AveragePool", {to_nchw(value_name(node.inputs[0]))}, {pooled});
  window_attributes(pool, node.window);
  if (!max) attribute(pool, "count_include_pad", 0);  // TF averages the valid inputs only
  to_nhwc(pooled, value_name(node.outputs.at(0)));
}

// Equal(indices[..., 1], [0, depth)) as the output dtype, scaled to on/off values: exact for
// every index, and out-of-range ones give all off values, as in TF.
void OnnxEmitter::emit_one_hot(const TracedNode& node) {
  const int in_id = node.inputs[0], out_id = node.outputs.at(0);
  const DType type = dtype(out_id);
  const int64_t depth = shape(out_id).back();
  std::vector<int64_t> target;
  for (size_t axis = 0; axis < shape(in_id).size(); ++axis)
    target.push_back(dynamic(in_id, axis) ? -1 : shape(in_id)[axis]);
  target.push_back(1);
  std::string ids = temporary(), column = temporary(), hot = temporary();
  std::string scaled = temporary();
  attribute(add("Cast", {value_name(in_id)}, {ids}), "to", onnx_dtype(DType::kI64));
  add("Reshape", {ids, int64_constant(target)}, {column});
  std::vector<int64_t> range(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i) range[static_cast<size_t>(i)] = i;
  std::string equal = temporary();
  add("Equal", {column, int64_constant(range)}, {equal});
  attribute(add("Cast", {equal}, {hot}), "to", onnx_dtype(type));
  add("Mul", {hot, scalar_constant(node.reals[0] - node.reals[1], type)}, {scaled});
  add("Add", {scaled, scalar_constant(node.reals[1], type)}, {value_name(out_id)});
}

// Inference with the moving statistics, over the last axis (est's NHWC / [N, C]):
// (x - mean) / sqrt(variance + epsilon) * gamma + beta, each a broadcast over channels.
void OnnxEmitter::emit_batch_norm(const TracedNode& node) {
  auto in = [&](size_t i) { return value_name(node.inputs.at(i)); };
  const int out_id = node.outputs.at(0);
  const std::string out = value_name(out_id);
  std::string shifted = temporary(), stddev = temporary(), variance = temporary();
  std::string normalized = temporary();
  add("Sub", {in(0), in(3)}, {shifted});
  add("Add", {in(4), scalar_constant(node.reals[0], dtype(out_id))}, {variance});
  add("Sqrt", {variance}, {stddev});
  add("Div", {shifted, stddev}, {normalized});
  if (node.inputs[1] >= 0) {
    std::string scaled = temporary();
    add("Mul", {normalized, in(1)}, {scaled});
    normalized = scaled;
  }
  if (node.inputs[2] >= 0) {
    add("Add", {normalized, in(2)}, {out});
  } else {
    add("Identity", {normalized}, {out});
  }
}

}  // namespace est::serving
