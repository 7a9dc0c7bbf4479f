// Harness cases for the shapes the GPU's convolution, pooling and batch norm kernels branch on
// (ops/cuda/conv.cpp, pool_kernels.cu, batch_norm_kernels.cu), beyond op_cases_kernels.cpp's:
// TensorFlow's asymmetric SAME padding in both dimensions (cuDNN gets an explicitly padded
// input), 1x1 kernels with strides, 1, 3 and 64 channels, batch 1; pooling with 64 channels, a
// 1x1 window and tied maxima; batch norm with more rows than a block has lanes, a partial tile
// of 32 channels, several blocks of rows, a large mean, epsilon 0, on rank 2 and rank 4. Like every
// case they run on every target: the reference, oneDNN here, and gpu/cuda on a machine with a GPU.
#include <cmath>

#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::Activation;
using ops::DType;
using ops::Generator;
using ops::Padding;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

// ---- conv2d -------------------------------------------------------------------------------

int register_conv(const std::string& name, Shape input, Shape kernel, ops::Conv2DParams params,
                  bool bias = true) {
  std::vector<Shape> shapes{input, kernel};
  std::vector<int> differentiable{0, 1};
  if (bias) {
    shapes.push_back({kernel[3]});
    differentiable.push_back(2);
  }
  return register_op_case({
      .name = "conv2d/gpu_paths/" + name,
      .make_inputs = uniform_inputs(shapes),
      .run =
          [params, bias](const Inputs& in) {
            return ops::conv2d(in[0], in[1], bias ? in[2] : Tensor(), params);
          },
      .differentiable = differentiable,
  });
}

const int conv_cases = [] {
  using P = ops::Conv2DParams;
  // SAME, stride 2 on even sizes: padding 0 on top/left, 1 at the bottom/right.
  register_conv("same/stride2/even/batch1/rgb", {1, 6, 6, 3}, {3, 3, 3, 8},
                P{.strides = {2, 2}, .padding = Padding::kSame});
  // A 4x4 kernel: padding 1 on top/left, 2 at the bottom/right.
  register_conv("same/4x4_kernel/asymmetric", {2, 5, 6, 2}, {4, 4, 2, 3},
                P{.padding = Padding::kSame, .activation = Activation::kTanh});
  register_conv("valid/pointwise/stride2", {2, 5, 6, 4}, {1, 1, 4, 5}, P{.strides = {2, 2}});
  register_conv("same/pointwise/stride2", {1, 6, 5, 3}, {1, 1, 3, 2},
                P{.strides = {2, 2}, .padding = Padding::kSame}, false);
  register_conv("same/channels64_in", {1, 4, 4, 64}, {3, 3, 64, 4},
                P{.padding = Padding::kSame, .activation = Activation::kRelu});
  register_conv("valid/channels64_out/stride2", {2, 5, 5, 3}, {3, 3, 3, 64}, P{.strides = {2, 2}});
  register_conv("same/one_channel/stride2/dilation2", {2, 7, 6, 1}, {2, 3, 1, 2},
                P{.strides = {2, 2}, .padding = Padding::kSame, .dilations = {2, 1}}, false);
  return 0;
}();

// ---- pooling ------------------------------------------------------------------------------

int register_pool(const std::string& name, Shape input, ops::Pool2DParams params, bool max) {
  return register_op_case({
      .name = std::string(max ? "max_pool2d" : "avg_pool2d") + "/gpu_paths/" + name,
      .make_inputs = uniform_inputs({input}),
      .run =
          [params, max](const Inputs& in) {
            return max ? ops::max_pool2d(in[0], params) : ops::avg_pool2d(in[0], params);
          },
      .differentiable = {0},
  });
}

// Values on a grid of 1/3 in [-1, 1]: a 3x3 window has tied maxima.
Inputs tied_inputs(Shape shape, DType dtype, Generator& generator) {
  std::vector<double> values =
      ops::random_uniform(shape, -1.0, 1.0, generator, DType::kF64).to_vector<double>();
  for (double& v : values) v = std::round(v * 3.0) / 3.0;
  return {ops::cast(Tensor::from_vector(values, shape), dtype)};
}

const int pool_cases = [] {
  using P = ops::Pool2DParams;
  for (bool max : {true, false}) {
    register_pool("same/3x3/stride2/channels64/batch1", {1, 5, 6, 64},
                  P{.window = {3, 3}, .strides = {2, 2}, .padding = Padding::kSame}, max);
    register_pool("valid/1x1/stride2", {2, 5, 5, 3}, P{.window = {1, 1}, .strides = {2, 2}}, max);
    // 2x2 windows at stride 1: SAME pads one row and column at the bottom/right only.
    register_pool("same/2x2/stride1/asymmetric", {2, 4, 5, 3},
                  P{.window = {2, 2}, .strides = {1, 1}, .padding = Padding::kSame}, max);
    register_pool("same/4x4/stride3", {1, 8, 7, 2},
                  P{.window = {4, 4}, .strides = {3, 3}, .padding = Padding::kSame}, max);
  }
  // Tied maxima: the gradient goes to the first maximum of a window in row-major order on every
  // backend (step 3 compares each target's gradient with the reference's). At a tie the
  // gradient is that convention, not a derivative, so the finite-difference check is off.
  register_op_case({
      .name = "max_pool2d/gpu_paths/tied_maxima",
      .make_inputs =
          [](DType dtype, Generator& generator) {
            return tied_inputs({2, 6, 6, 3}, dtype, generator);
          },
      .run =
          [](const Inputs& in) {
            return ops::max_pool2d(
                in[0], {.window = {3, 3}, .strides = {1, 1}, .padding = Padding::kSame});
          },
      .differentiable = {0},
      .gradient_tolerance = 1e9,
  });
  return 0;
}();

// ---- batch norm ---------------------------------------------------------------------------

// x in [low, high), gamma, beta; the statistics for inference.
auto batch_norm_inputs(Shape x, bool statistics, double low = -2.0, double high = 2.0) {
  return [x, statistics, low, high](DType dtype, Generator& g) {
    const int64_t channels = x.back();
    Inputs in{ops::random_uniform(x, low, high, g, dtype),
              ops::random_uniform({channels}, 0.5, 1.5, g, dtype),
              ops::random_uniform({channels}, -1.0, 1.0, g, dtype)};
    if (statistics) {
      in.push_back(ops::random_uniform({channels}, -0.5, 0.5, g, dtype));
      in.push_back(ops::random_uniform({channels}, 0.5, 2.0, g, dtype));
    }
    return in;
  };
}

enum class BatchNormOutput { kOutput, kMean, kVariance };

int register_training(const std::string& name, Shape x, double epsilon, BatchNormOutput which,
                      double low = -2.0, double high = 2.0) {
  return register_op_case({
      .name = "batch_norm_training/gpu_paths/" + name,
      .make_inputs = batch_norm_inputs(x, false, low, high),
      .run =
          [epsilon, which](const Inputs& in) {
            auto out = ops::batch_norm_training(in[0], in[1], in[2], epsilon);
            return which == BatchNormOutput::kOutput ? out.output
                   : which == BatchNormOutput::kMean ? out.batch_mean
                                                     : out.batch_variance;
          },
      .differentiable =
          which == BatchNormOutput::kOutput ? std::vector<int>{0, 1, 2} : std::vector<int>{},
  });
}

const int batch_norm_cases = [] {
  using enum BatchNormOutput;
  // 40 rows (more than a block's 16 lanes) and 70 channels (two full tiles of 32 and a part).
  register_training("nhwc/70_channels", {2, 5, 4, 70}, 1e-3, kOutput);
  register_training("nhwc/70_channels/mean", {2, 5, 4, 70}, 1e-3, kMean);
  register_training("nhwc/70_channels/variance", {2, 5, 4, 70}, 1e-3, kVariance);
  // A large mean: the variance is taken around it (two passes), not from E[x^2] - E[x]^2.
  register_training("nhwc/offset/variance", {2, 4, 4, 3}, 1e-3, kVariance, 100.0, 101.0);
  register_training("nc/33_rows", {33, 3}, 1e-3, kOutput);
  register_training("nc/33_rows/variance", {33, 3}, 1e-3, kVariance);
  register_training("nc/epsilon0", {7, 5}, 0.0, kOutput);
  register_training("nhwc/batch1", {1, 3, 3, 5}, 1e-3, kOutput);
  // 9000 rows: the GPU sums them in three blocks of rows (forward only: too many elements for
  // finite differences).
  register_training("nc/9000_rows/mean", {9000, 3}, 1e-3, kMean);
  register_training("nc/9000_rows/variance", {9000, 3}, 1e-3, kVariance);
  register_op_case({
      .name = "batch_norm_inference/gpu_paths/nhwc/70_channels/batch1",
      .make_inputs = batch_norm_inputs({1, 3, 3, 70}, true),
      .run =
          [](const Inputs& in) {
            return ops::batch_norm_inference(in[0], in[1], in[2], in[3], in[4], 1e-3);
          },
      .differentiable = {0, 1, 2},
  });
  return 0;
}();

}  // namespace
}  // namespace est::testing
