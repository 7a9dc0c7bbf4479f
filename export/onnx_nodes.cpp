// The ONNX ops est's interpreter runs, each with est's kernels (see onnx_nodes.h).
#include "export/onnx_nodes.h"

#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

#include "export/onnx_model.h"
#include "ops/cpu/window.h"

namespace est::serving {
namespace {

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

}  // namespace

// Transpose is lazy; the elementwise ops whose result does
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
    ops::Conv2DParams params{
        .strides = pair_of(strides, 1),
        .padding = padding_of(node, in[0].shape(), kernel, strides, dilations),
        .dilations = pair_of(dilations, 1),
        .activation = node.relu_fused ? ops::Activation::kRelu : ops::Activation::kNone};
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

}  // namespace est::serving
