// Trace -> ONNX ModelProto: the structural check of the two traces, liveness, and one short
// emitter per registry op (see onnx_export.h).
#include "export/onnx_export.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "onnx_subset.pb.h"
#include "ops/error.h"
#include "ops/registry.h"

namespace est::serving {
namespace {

using ops::Activation;
using ops::OpId;
namespace onnx = est::serving::onnx;

// A string vocabulary list without OOV buckets is ai.onnx.ml's LabelEncoder in the graph, an
// identity column with a default is arithmetic on the ids; the other lookups need TF's
// Fingerprint64 or an error on bad ids, which ONNX has not, and a vocabulary file is an asset
// the step reads.
bool lookup_in_graph(const feature_column::LookupTable& table) {
  using Kind = feature_column::LookupTable::Kind;
  return (table.kind == Kind::kVocabulary && table.key_dtype == DType::kString &&
          table.num_oov_buckets == 0 && table.vocabulary_file.empty()) ||
         (table.kind == Kind::kIdentity && table.has_default);
}

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

class Emitter {
 public:
  Emitter(const Trace& trace, const Trace& other, onnx::GraphProto& graph)
      : a_(trace), b_(other), graph_(graph) {}

  std::string value_name(int id) const {
    if (id < 0) return "";
    auto input = input_names_.find(id);
    if (input != input_names_.end()) return input->second;
    auto named = a_.constant_names.find(id);
    if (named != a_.constant_names.end()) return named->second;
    return fmt::format("est/value_{}", id);
  }
  bool dynamic(int id, size_t axis) const {
    return a_.values[id].shape[axis] != b_.values[id].shape[axis];
  }
  const Shape& shape(int id) const { return a_.values[id].shape; }

  void set_inputs() {
    for (const auto& [name, id] : a_.inputs) input_names_[id] = name;
  }
  void set_input_name(int id, const std::string& name) { input_names_[id] = name; }

  void add_value_info(onnx::ValueInfoProto* info, const std::string& name, int id) {
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

  void add_initializer(const std::string& name, const Tensor& value) {
    Tensor host = value.to(Device::cpu());
    auto* tensor = graph_.add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx_dtype(host.dtype()));
    for (int64_t dim : host.shape()) tensor->add_dims(dim);
    if (host.dtype() == DType::kString) {  // strings are string_data, never raw bytes
      for (int64_t i = 0; i < host.numel(); ++i)
        tensor->add_string_data(host.data<std::string>()[i]);
      return;
    }
    tensor->set_raw_data(std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
  }
  std::string int64_constant(const std::vector<int64_t>& values) {
    std::string name = fmt::format("est/shape_{}", counter_++);
    add_initializer(name, Tensor::from_vector(values));
    return name;
  }
  std::string scalar_constant(double value, DType dtype) {
    std::string name = fmt::format("est/const_{}", counter_++);
    add_initializer(name, Tensor::full({}, value, dtype));
    return name;
  }
  std::string temporary() { return fmt::format("est/tmp_{}", counter_++); }

  onnx::NodeProto* add(const std::string& op_type, std::vector<std::string> inputs,
                       std::vector<std::string> outputs) {
    auto* node = graph_.add_node();
    node->set_op_type(op_type);
    node->set_name(fmt::format("{}_{}", op_type, counter_++));
    for (auto& input : inputs) node->add_input(input);
    for (auto& output : outputs) node->add_output(output);
    return node;
  }
  static void attribute(onnx::NodeProto* node, const std::string& name, int64_t value) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void attribute(onnx::NodeProto* node, const std::string& name,
                        const std::vector<std::string>& values) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const std::string& v : values) a->add_strings(v);
  }
  static void attribute(onnx::NodeProto* node, const std::string& name,
                        const std::vector<int64_t>& values) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }

  // `x` through the fused activation into `output` (an Identity when there is none).
  void activation(Activation activation, const std::string& x, const std::string& output) {
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
  std::string to_nchw(const std::string& x) {
    std::string out = temporary();
    attribute(add("Transpose", {x}, {out}), "perm", std::vector<int64_t>{0, 3, 1, 2});
    return out;
  }
  void to_nhwc(const std::string& x, const std::string& output) {
    attribute(add("Transpose", {x}, {output}), "perm", std::vector<int64_t>{0, 2, 3, 1});
  }
  static void window_attributes(onnx::NodeProto* node, const ops::cpu::Window2D& w) {
    attribute(node, "kernel_shape", std::vector<int64_t>{w.kernel_h, w.kernel_w});
    attribute(node, "strides", std::vector<int64_t>{w.stride_h, w.stride_w});
    attribute(node, "pads", std::vector<int64_t>{w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
  }
  // Swaps the last two axes of `x` (value id `id`) when `transpose`.
  std::string maybe_transposed(int id, bool transpose) {
    if (!transpose) return value_name(id);
    std::vector<int64_t> perm;
    for (size_t i = 0; i < shape(id).size(); ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    std::string out = temporary();
    attribute(add("Transpose", {value_name(id)}, {out}), "perm", perm);
    return out;
  }

  // An identity column's ids with a default, in int64 arithmetic (ONNX 13 has no Where on
  // ints that est runs): ignored = x == -1, in = (x > -1) * (x < num_buckets),
  // v = in * x + (1 - in) * default, ids = v * (1 - ignored) - ignored.
  void identity_lookup(const TracedNode& node, const feature_column::LookupTable& table) {
    std::string x = value_name(node.inputs.at(0));
    if (a_.values[node.inputs.at(0)].dtype != DType::kI64) {
      std::string cast = temporary();
      attribute(add("Cast", {x}, {cast}), "to", onnx_dtype(DType::kI64));
      x = cast;
    }
    auto as_int = [&](const std::string& op, const std::string& a, double b) {
      std::string compared = temporary(), out = temporary();
      add(op, {a, scalar_constant(b, DType::kI64)}, {compared});
      attribute(add("Cast", {compared}, {out}), "to", onnx_dtype(DType::kI64));
      return out;
    };
    const std::string one = scalar_constant(1, DType::kI64);
    std::string ignored = as_int("Equal", x, -1), in_range = temporary();
    add("Mul",
        {as_int("Greater", x, -1), as_int("Less", x, static_cast<double>(table.num_buckets))},
        {in_range});
    std::string kept = temporary(), outside = temporary(), defaults = temporary();
    std::string value = temporary(), not_ignored = temporary(), masked = temporary();
    add("Mul", {in_range, x}, {kept});
    add("Sub", {one, in_range}, {outside});
    add("Mul", {outside, scalar_constant(static_cast<double>(table.default_value), DType::kI64)},
        {defaults});
    add("Add", {kept, defaults}, {value});
    add("Sub", {one, ignored}, {not_ignored});
    add("Mul", {value, not_ignored}, {masked});
    add("Sub", {masked, ignored}, {value_name(node.outputs.at(0))});
  }

  void emit(const TracedNode& node);
  // Whether a node of ONNX's ai.onnx.ml domain (LabelEncoder) was written.
  bool uses_ml_domain() const { return uses_ml_domain_; }

 private:
  bool uses_ml_domain_ = false;
  const Trace& a_;
  const Trace& b_;
  onnx::GraphProto& graph_;
  std::map<int, std::string> input_names_;
  int counter_ = 0;
};

void Emitter::emit(const TracedNode& node) {
  auto in = [&](size_t i) { return value_name(node.inputs.at(i)); };
  const int out_id = node.outputs.at(0);
  const std::string out = value_name(out_id);
  if (node.kind == NodeKind::kLookup) {  // other feature lookups are graph inputs
    const auto& table = a_.lookups.at(static_cast<size_t>(node.member)).table;
    if (lookup_in_graph(table) && table.kind == feature_column::LookupTable::Kind::kIdentity) {
      identity_lookup(node, table);
      return;
    }
    if (lookup_in_graph(table)) {
      // ai.onnx.ml's LabelEncoder: each key's position, "" (TF's ignored value) -1, others
      // default_value.
      std::vector<std::string> keys = table.string_keys;
      std::vector<int64_t> values;
      for (size_t i = 0; i < keys.size(); ++i)
        values.push_back(keys[i].empty() ? -1 : static_cast<int64_t>(i));
      if (std::find(keys.begin(), keys.end(), std::string()) == keys.end()) {
        keys.emplace_back();
        values.push_back(-1);
      }
      auto* encoder = add("LabelEncoder", {in(0)}, {out});
      encoder->set_domain(kOnnxMlDomain);
      attribute(encoder, "keys_strings", keys);
      attribute(encoder, "values_int64s", values);
      attribute(encoder, "default_int64", table.default_value);
      uses_ml_domain_ = true;
      return;
    }
    if (table.kind != feature_column::LookupTable::Kind::kIndexToString)
      refuse(node, "a lookup over a value model_fn computed (lookups read features)");
    const std::string strings = fmt::format("est/strings_{}", counter_++);
    add_initializer(strings,
                    Tensor::from_vector<std::string>(table.string_keys, {table.vocabulary_size()}));
    attribute(add("Gather", {strings, in(0)}, {out}), "axis", int64_t{0});
    return;
  }
  if (node.kind == NodeKind::kReshape) {
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
    add("Reshape", {in(0), int64_constant(target)}, {out});
    return;
  }
  switch (node.op) {
    case OpId::kCopy:
      add("Identity", {in(0)}, {out});
      return;
    case OpId::kCast:
      attribute(add("Cast", {in(0)}, {out}), "to", onnx_dtype(a_.values[out_id].dtype));
      return;
    case OpId::kBinary: {
      static const char* const kTypes[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
      const auto op = static_cast<ops::BinaryOp>(node.member);
      if (op == ops::BinaryOp::kDiv && !is_floating(a_.values[out_id].dtype))
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
    case OpId::kUnary: {
      const DType dtype = a_.values[out_id].dtype;
      switch (static_cast<ops::UnaryOp>(node.member)) {
        case ops::UnaryOp::kNeg:
          add("Neg", {in(0)}, {out});
          return;
        case ops::UnaryOp::kExp:
          add("Exp", {in(0)}, {out});
          return;
        case ops::UnaryOp::kLog:
          add("Log", {in(0)}, {out});
          return;
        case ops::UnaryOp::kSqrt:
          add("Sqrt", {in(0)}, {out});
          return;
        case ops::UnaryOp::kSquare:
          add("Mul", {in(0), in(0)}, {out});
          return;
        case ops::UnaryOp::kAbs:
          add("Abs", {in(0)}, {out});
          return;
        case ops::UnaryOp::kRelu:
          add("Relu", {in(0)}, {out});
          return;
        case ops::UnaryOp::kSigmoid:
          add("Sigmoid", {in(0)}, {out});
          return;
        case ops::UnaryOp::kTanh:
          add("Tanh", {in(0)}, {out});
          return;
        case ops::UnaryOp::kClip:
          add("Clip",
              {in(0), scalar_constant(node.reals[0], dtype), scalar_constant(node.reals[1], dtype)},
              {out});
          return;
        case ops::UnaryOp::kPow:
          add("Pow", {in(0), scalar_constant(node.reals[0], dtype)}, {out});
          return;
      }
      break;
    }
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
    case OpId::kSlice: {
      const int in_id = node.inputs[0];
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
      add("Slice", {in(0), int64_constant(node.ints), int64_constant(ends), int64_constant(axes)},
          {out});
      return;
    }
    case OpId::kGather:
      attribute(add("Gather", {in(0), in(1)}, {out}), "axis", node.ints[0]);
      return;
    case OpId::kSoftmax:
      attribute(add(node.flag_a ? "LogSoftmax" : "Softmax", {in(0)}, {out}), "axis", node.ints[0]);
      return;
    case OpId::kMatmul: {
      std::string product = temporary();
      add("MatMul",
          {maybe_transposed(node.inputs[0], node.flag_a),
           maybe_transposed(node.inputs[1], node.flag_b)},
          {product});
      if (node.inputs[2] >= 0) {
        std::string biased = temporary();
        add("Add", {product, in(2)}, {biased});
        product = biased;
      }
      activation(node.activation, product, out);
      return;
    }
    case OpId::kBiasAdd:
      add("Add", {in(0), in(1)}, {out});
      return;
    case OpId::kActivation:
      activation(node.activation, in(0), out);
      return;
    case OpId::kConv2D: {
      const auto& w = node.window;
      const Shape& kernel = shape(node.inputs[1]);  // [KH, KW, IC / groups, OC]
      std::string kernel_oihw = temporary();
      attribute(add("Transpose", {in(1)}, {kernel_oihw}), "perm", std::vector<int64_t>{3, 2, 0, 1});
      std::vector<std::string> inputs{to_nchw(in(0)), kernel_oihw};
      if (node.inputs[2] >= 0) inputs.push_back(in(2));
      std::string convolved = temporary();
      auto* conv = add("Conv", inputs, {convolved});
      window_attributes(conv, w);
      attribute(conv, "dilations", std::vector<int64_t>{w.dilation_h, w.dilation_w});
      attribute(conv, "group", w.in_c / kernel[2]);
      std::string activated = temporary();
      activation(node.activation, convolved, activated);
      to_nhwc(activated, out);
      return;
    }
    case OpId::kPool2D: {
      const bool max = static_cast<ops::PoolKind>(node.member) == ops::PoolKind::kMax;
      std::string pooled = temporary();
      auto* pool = add(max ? "MaxPool" : "AveragePool", {to_nchw(in(0))}, {pooled});
      window_attributes(pool, node.window);
      if (!max) attribute(pool, "count_include_pad", 0);  // TF averages the valid inputs only
      to_nhwc(pooled, out);
      return;
    }
    case OpId::kOneHot: {
      // Equal(indices[..., 1], [0, depth)) as the output dtype, scaled to on/off values: exact
      // for every index, and out-of-range ones give all off values, as in TF.
      const int in_id = node.inputs[0];
      const DType dtype = a_.values[out_id].dtype;
      const int64_t depth = shape(out_id).back();
      std::vector<int64_t> target;
      for (size_t axis = 0; axis < shape(in_id).size(); ++axis)
        target.push_back(dynamic(in_id, axis) ? -1 : shape(in_id)[axis]);
      target.push_back(1);
      std::string ids = temporary(), column = temporary(), hot = temporary();
      std::string scaled = temporary();
      attribute(add("Cast", {in(0)}, {ids}), "to", onnx_dtype(DType::kI64));
      add("Reshape", {ids, int64_constant(target)}, {column});
      std::vector<int64_t> range(static_cast<size_t>(depth));
      for (int64_t i = 0; i < depth; ++i) range[static_cast<size_t>(i)] = i;
      std::string equal = temporary();
      add("Equal", {column, int64_constant(range)}, {equal});
      attribute(add("Cast", {equal}, {hot}), "to", onnx_dtype(dtype));
      add("Mul", {hot, scalar_constant(node.reals[0] - node.reals[1], dtype)}, {scaled});
      add("Add", {scaled, scalar_constant(node.reals[1], dtype)}, {out});
      return;
    }
    case OpId::kBatchNorm: {
      // Inference with the moving statistics, over the last axis (est's NHWC / [N, C]):
      // (x - mean) / sqrt(variance + epsilon) * gamma + beta, each a broadcast over channels.
      const DType dtype = a_.values[out_id].dtype;
      std::string shifted = temporary(), stddev = temporary(), variance = temporary();
      std::string normalized = temporary();
      add("Sub", {in(0), in(3)}, {shifted});
      add("Add", {in(4), scalar_constant(node.reals[0], dtype)}, {variance});
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
      return;
    }
    default:
      break;
  }
  refuse(node, "it has no ONNX form in est's exporter");
}

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

// A lookup that runs before the graph (lookup_step.h): any but an index-to-string table and a
// string vocabulary list without OOV buckets (LabelEncoder).
bool is_feature_lookup(const Trace& trace, const TracedNode& node) {
  if (node.kind != NodeKind::kLookup) return false;
  const auto& table = trace.lookups.at(static_cast<size_t>(node.member)).table;
  return table.kind != feature_column::LookupTable::Kind::kIndexToString && !lookup_in_graph(table);
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
  Emitter emitter(trace, other, graph);
  emitter.set_inputs();
  // What cannot be written is refused by name first: a host computation also leaves constants
  // that change with the input behind it.
  for (size_t i : live_nodes) {
    if (trace.nodes[i].kind == NodeKind::kUnsupported ||
        trace.nodes[i].kind == NodeKind::kHostComputed)
      refuse(trace.nodes[i], "it has no ONNX form in est's exporter");
  }
  // Feature lookups: each reads a graph input (through reshapes) and feeds "<column>/ids".
  std::map<int, std::string> input_of;  // value id -> graph input name
  for (const auto& [name, id] : trace.inputs) input_of[id] = name;
  std::set<int> looked_up;  // graph inputs a lookup reads
  std::vector<LookupStep> steps;
  for (size_t i : live_lookups) {
    const TracedNode& node = trace.nodes[i];
    if (lookups == nullptr)
      refuse(node,
             "its lookup runs as est-serve's pre-processing step, which only "
             "Estimator::export_saved_model writes (signatures.json)");
    int root = node.inputs.at(0);
    while (producer.count(root) && trace.nodes[producer.at(root)].kind == NodeKind::kReshape)
      root = trace.nodes[producer.at(root)].inputs.at(0);
    if (!input_of.count(root)) refuse(node, "it reads a value model_fn computed, not a feature");
    looked_up.insert(root);
    const feature_column::LookupTable& table =
        trace.lookups.at(static_cast<size_t>(node.member)).table;
    const std::string& feature = input_of.at(root);
    std::string name;
    for (const LookupStep& step : steps)
      if (step.input == feature && step.table == table) name = step.output;
    if (name.empty()) {
      name = node.name + "/ids";
      for (int n = 1;; ++n) {  // a name no other step or input has
        bool taken = trace.inputs.count(name) > 0;
        for (const LookupStep& step : steps) taken = taken || step.output == name;
        if (!taken) break;
        name = fmt::format("{}/ids_{}", node.name, n);
      }
      steps.push_back({.input = feature, .output = name, .table = table});
      emitter.add_value_info(graph.add_input(), name, node.outputs.at(0));
    }
    emitter.set_input_name(node.outputs.at(0), name);
  }
  for (const auto& [name, id] : trace.inputs)
    if (live_values.count(id) || !looked_up.count(id))
      emitter.add_value_info(graph.add_input(), name, id);
  if (lookups != nullptr)
    for (LookupStep& step : steps) lookups->push_back(std::move(step));
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
  for (size_t i : live_nodes) emitter.emit(trace.nodes[i]);
  if (emitter.uses_ml_domain()) {
    auto* ml = model.add_opset_import();
    ml->set_domain(kOnnxMlDomain);
    ml->set_version(kOnnxMlOpsetVersion);
  }
  for (const auto& [name, id] : trace.outputs) {
    emitter.add("Identity", {emitter.value_name(id)}, {name});
    emitter.add_value_info(graph.add_output(), name, id);
  }
  return model.SerializeAsString();
}

}  // namespace est::serving
