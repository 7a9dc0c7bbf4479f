// Harness cases for the heavy kernels (ops/linalg.h, ops/conv.h, ops/batch_norm.h): conv2d over
// paddings, strides, dilations, odd sizes, bias and activations; pooling with valid/same and
// overlapping windows; batch norm in training and inference on [N, C] and NHWC; matmul with each
// transpose and batch pattern; linear with each activation. Shapes are small because the
// finite-difference check perturbs every input element.
//
// Tolerances: the float32 forward and backward comparisons (oneDNN vs reference) use the harness
// default, 1e-4 of the largest reference value: these ops sum at most ~100 float32 products of
// values in [-1, 1], whose rounding error stays below 1e-5 of the result's scale. Gradients in
// float64 against central differences (step 1e-6) use 1e-5 except where noted.
#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::Activation;
using ops::DType;
using ops::Generator;
using ops::Padding;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

constexpr auto uniform = [](std::vector<Shape> shapes, double low = -1.0, double high = 1.0) {
  return uniform_inputs(std::move(shapes), low, high);
};

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
  }
  return "?";
}

constexpr Activation kActivations[] = {Activation::kNone, Activation::kRelu, Activation::kSigmoid,
                                       Activation::kTanh};

// ---- conv2d -------------------------------------------------------------------------------

struct ConvCase {
  std::string name;
  Shape input;   // [N, H, W, C]
  Shape kernel;  // [KH, KW, C, OC]
  ops::Conv2DParams params;
  bool bias = true;
  bool input_gradient = true;  // false: a first layer (no backward-data; a fused kernel gradient)
};

int register_conv(const ConvCase& c) {
  std::vector<Shape> input_shapes{c.input, c.kernel};
  if (c.bias) input_shapes.push_back({c.kernel[3]});
  std::vector<int> differentiable{1};
  if (c.input_gradient) differentiable.insert(differentiable.begin(), 0);
  if (c.bias) differentiable.push_back(2);
  return register_op_case({
      .name = "conv2d/" + c.name,
      .make_inputs = uniform(input_shapes),
      .run =
          [params = c.params, bias = c.bias](const Inputs& in) {
            return ops::conv2d(in[0], in[1], bias ? in[2] : Tensor(), params);
          },
      .differentiable = differentiable,
  });
}

const int conv_cases = [] {
  using P = ops::Conv2DParams;
  register_conv({"valid/stride1/no_bias", {2, 5, 6, 3}, {3, 3, 3, 4}, P{}, false});
  register_conv({"same/stride1", {2, 5, 5, 2}, {3, 3, 2, 3}, P{.padding = Padding::kSame}});
  register_conv({"same/stride2/odd",
                 {1, 7, 6, 2},
                 {3, 3, 2, 3},
                 P{.strides = {2, 2}, .padding = Padding::kSame}});
  register_conv({"valid/stride2/odd", {2, 7, 7, 2}, {3, 2, 2, 3}, P{.strides = {2, 2}}});
  register_conv({"same/strides1x2/even_kernel",
                 {2, 6, 7, 2},
                 {2, 4, 2, 3},
                 P{.strides = {1, 2}, .padding = Padding::kSame}});
  register_conv({"same/dilation2",
                 {1, 7, 7, 2},
                 {3, 3, 2, 2},
                 P{.padding = Padding::kSame, .dilations = {2, 2}}});
  register_conv({"valid/dilation2", {2, 8, 7, 2}, {3, 2, 2, 3}, P{.dilations = {2, 2}}});
  register_conv({"same/stride2/dilation2",
                 {1, 9, 8, 2},
                 {3, 3, 2, 2},
                 P{.strides = {2, 2}, .padding = Padding::kSame, .dilations = {2, 2}}});
  register_conv({"batch1/pointwise", {1, 4, 5, 3}, {1, 1, 3, 4}, P{}});
  register_conv({"first_layer/one_channel", {3, 6, 6, 1}, {3, 3, 1, 4}, P{}});
  register_conv(
      {"same/kernel_larger_than_input", {2, 2, 3, 2}, {4, 4, 2, 2}, P{.padding = Padding::kSame}});
  for (Activation a : kActivations)
    register_conv({std::string("same/activation_") + activation_name(a),
                   {2, 5, 4, 3},
                   {3, 3, 3, 4},
                   P{.padding = Padding::kSame, .activation = a}});
  register_conv({"valid/relu/no_bias",
                 {2, 6, 5, 2},
                 {3, 3, 2, 3},
                 P{.activation = Activation::kRelu},
                 false});
  // First layers: the input needs no gradient, and 16k output channels take the fused kernel
  // gradient on the oneDNN backend.
  for (Activation a : kActivations)
    register_conv({std::string("first_layer/valid/") + activation_name(a),
                   {2, 6, 7, 1},
                   {3, 3, 1, 16},
                   P{.activation = a},
                   true,
                   false});
  register_conv({"first_layer/same/stride2/rgb",
                 {2, 7, 6, 3},
                 {3, 3, 3, 32},
                 P{.strides = {2, 2}, .padding = Padding::kSame, .activation = Activation::kRelu},
                 true,
                 false});
  register_conv({"first_layer/same/dilation2/no_bias",
                 {1, 7, 8, 2},
                 {3, 2, 2, 16},
                 P{.padding = Padding::kSame, .dilations = {2, 2}},
                 false,
                 false});
  register_conv({"first_layer/unsupported_channels",
                 {2, 5, 5, 1},
                 {3, 3, 1, 5},
                 P{.activation = Activation::kRelu},
                 true,
                 false});
  return 0;
}();

// ---- pooling ------------------------------------------------------------------------------

int register_pool(const std::string& name, Shape input, ops::Pool2DParams params, bool max) {
  return register_op_case({
      .name = std::string(max ? "max_pool2d/" : "avg_pool2d/") + name,
      .make_inputs = uniform({input}),
      .run =
          [params, max](const Inputs& in) {
            return max ? ops::max_pool2d(in[0], params) : ops::avg_pool2d(in[0], params);
          },
      .differentiable = {0},
  });
}

const int pool_cases = [] {
  using P = ops::Pool2DParams;
  for (bool max : {true, false}) {
    register_pool("valid/2x2", {2, 6, 6, 3}, P{}, max);
    register_pool("valid/odd", {2, 7, 5, 2}, P{}, max);
    register_pool("same/odd", {2, 7, 5, 2}, P{.padding = Padding::kSame}, max);
    register_pool("same/3x3/stride2", {1, 6, 7, 3},
                  P{.window = {3, 3}, .strides = {2, 2}, .padding = Padding::kSame}, max);
    register_pool("valid/overlapping_3x3/stride1", {2, 5, 6, 2},
                  P{.window = {3, 3}, .strides = {1, 1}}, max);
    register_pool("same/overlapping_3x2/stride1x2", {1, 5, 6, 3},
                  P{.window = {3, 2}, .strides = {1, 2}, .padding = Padding::kSame}, max);
  }
  return 0;
}();

// ---- batch norm ---------------------------------------------------------------------------

constexpr double kEpsilon = 1e-3;

// x, gamma, beta; statistics (positive variance) for inference.
auto batch_norm_inputs(Shape x, bool statistics) {
  return [x, statistics](DType dtype, Generator& g) {
    const int64_t channels = x.back();
    Inputs in{ops::random_uniform(x, -2.0, 2.0, g, dtype),
              ops::random_uniform({channels}, 0.5, 1.5, g, dtype),
              ops::random_uniform({channels}, -1.0, 1.0, g, dtype)};
    if (statistics) {
      in.push_back(ops::random_uniform({channels}, -0.5, 0.5, g, dtype));
      in.push_back(ops::random_uniform({channels}, 0.5, 2.0, g, dtype));
    }
    return in;
  };
}

const int batch_norm_cases = [] {
  for (Shape x : {Shape{6, 4}, Shape{2, 3, 3, 4}}) {
    const std::string layout = x.size() == 2 ? "nc" : "nhwc";
    register_op_case({
        .name = "batch_norm_training/" + layout,
        .make_inputs = batch_norm_inputs(x, false),
        .run =
            [](const Inputs& in) {
              return ops::batch_norm_training(in[0], in[1], in[2], kEpsilon).output;
            },
        .differentiable = {0, 1, 2},
    });
    register_op_case({
        .name = "batch_norm_training/" + layout + "/no_scale_no_shift",
        .make_inputs = batch_norm_inputs(x, false),
        .run =
            [](const Inputs& in) {
              return ops::batch_norm_training(in[0], Tensor(), Tensor(), kEpsilon).output;
            },
        .differentiable = {0},
    });
    register_op_case({
        .name = "batch_norm_training/" + layout + "/batch_variance",
        .make_inputs = batch_norm_inputs(x, false),
        .run =
            [](const Inputs& in) {
              return ops::batch_norm_training(in[0], in[1], in[2], kEpsilon).batch_variance;
            },
    });
    register_op_case({
        .name = "batch_norm_inference/" + layout,
        .make_inputs = batch_norm_inputs(x, true),
        .run =
            [](const Inputs& in) {
              return ops::batch_norm_inference(in[0], in[1], in[2], in[3], in[4], kEpsilon);
            },
        .differentiable = {0, 1, 2},
    });
  }
  register_op_case({
      .name = "batch_norm_training/nhwc/shift_only",
      .make_inputs = batch_norm_inputs({2, 2, 3, 3}, false),
      .run =
          [](const Inputs& in) {
            return ops::batch_norm_training(in[0], Tensor(), in[2], kEpsilon).output;
          },
      .differentiable = {0, 2},
  });
  return 0;
}();

// ---- matmul, linear, bias_add, activate ---------------------------------------------------

int register_matmul(const std::string& name, Shape a, Shape b, bool transpose_a, bool transpose_b) {
  return register_op_case({
      .name = "matmul/" + name,
      .make_inputs = uniform({a, b}),
      .run = [transpose_a, transpose_b](
                 const Inputs& in) { return ops::matmul(in[0], in[1], transpose_a, transpose_b); },
      .differentiable = {0, 1},
  });
}

const int matmul_cases = [] {
  register_matmul("plain", {3, 4}, {4, 5}, false, false);
  register_matmul("transpose_a", {4, 3}, {4, 5}, true, false);
  register_matmul("transpose_b", {3, 4}, {5, 4}, false, true);
  register_matmul("transpose_both", {4, 3}, {5, 4}, true, true);
  register_matmul("batched", {2, 3, 4}, {2, 4, 5}, false, false);
  register_matmul("batched/transpose_both", {2, 4, 3}, {2, 5, 4}, true, true);
  register_matmul("batched_a/shared_b", {2, 3, 4}, {4, 5}, false, false);
  register_matmul("batched_a/shared_b/transpose_a", {2, 4, 3}, {4, 5}, true, false);
  register_matmul("batched_a/shared_b/transpose_b", {2, 3, 4}, {5, 4}, false, true);
  register_matmul("shared_a/batched_b", {3, 4}, {2, 4, 5}, false, false);
  register_matmul("shared_a/batched_b/transpose_both", {4, 3}, {2, 5, 4}, true, true);
  register_matmul("rank4/transpose_b", {2, 2, 3, 4}, {2, 2, 3, 4}, false, true);
  register_matmul("vector_times_matrix", {1, 6}, {6, 3}, false, false);
  return 0;
}();

const int linear_cases = [] {
  for (Activation a : kActivations)
    register_op_case({
        .name = std::string("linear/") + activation_name(a),
        .make_inputs = uniform({{5, 6}, {6, 4}, {4}}),
        .run = [a](const Inputs& in) { return ops::linear(in[0], in[1], in[2], a); },
        .differentiable = {0, 1, 2},
    });
  register_op_case({
      .name = "linear/no_bias/relu",
      .make_inputs = uniform({{4, 7}, {7, 3}}),
      .run =
          [](const Inputs& in) { return ops::linear(in[0], in[1], Tensor(), Activation::kRelu); },
      .differentiable = {0, 1},
  });
  // Past one cuBLAS tile, with odd sizes (the GPU's bfloat16 product into a float32 buffer,
  // then bias and activation); only the bias's gradient, to keep finite differences cheap.
  register_op_case({
      .name = "linear/large/relu",
      .make_inputs = uniform({{67, 130}, {130, 45}, {45}}),
      .run = [](const Inputs& in) { return ops::linear(in[0], in[1], in[2], Activation::kRelu); },
      .differentiable = {2},
  });
  // An empty sum (k = 0): the output is the bias, through the activation.
  register_op_case({
      .name = "linear/empty_k/sigmoid",
      .make_inputs = uniform({{3, 0}, {0, 4}, {4}}),
      .run =
          [](const Inputs& in) { return ops::linear(in[0], in[1], in[2], Activation::kSigmoid); },
      .differentiable = {2},
  });
  register_op_case({
      .name = "linear/rank3_input",
      .make_inputs = uniform({{2, 3, 5}, {5, 4}, {4}}),
      .run = [](const Inputs& in) { return ops::linear(in[0], in[1], in[2]); },
      .differentiable = {0, 1, 2},
  });
  register_op_case({
      .name = "bias_add/nhwc",
      .make_inputs = uniform({{2, 3, 2, 4}, {4}}),
      .run = [](const Inputs& in) { return ops::bias_add(in[0], in[1]); },
      .differentiable = {0, 1},
  });
  for (Activation a : {Activation::kRelu, Activation::kSigmoid, Activation::kTanh})
    register_op_case({
        .name = std::string("activate/") + activation_name(a),
        .make_inputs = uniform({{3, 7}}),
        .run = [a](const Inputs& in) { return ops::activate(in[0], a); },
        .differentiable = {0},
    });
  return 0;
}();

}  // namespace
}  // namespace est::testing
