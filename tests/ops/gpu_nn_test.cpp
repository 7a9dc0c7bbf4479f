// Convolution (cuDNN), pooling and batch norm on a real GPU: TensorFlow's semantics checked on
// hand-computed values (the odd SAME padding element at the bottom/right, average pooling
// without the padding, the gradient of tied maxima, the biased batch variance), realistic
// shapes against the CPU reference (the algorithms cuDNN picks for them), the direct kernels
// that run where cuDNN has no algorithm, float64, and the steady state of a conv layer's
// training step (no new GPU memory once the first step has chosen its algorithms and sized its
// workspaces). Small shapes against the reference are the op harness's gpu/cuda cases
// (test_ops). Exits 77 (skipped) where no GPU can run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/allocator.h"
#include "ops/ops.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {

const Device kGpu = Device::cuda(0);

// [1, H, W, 1] image holding `values` row by row, on the GPU.
Tensor image(const std::vector<float>& values, int64_t h, int64_t w) {
  return Tensor::from_vector(values, {1, h, w, 1}).to(kGpu);
}

void check_close(const Tensor& actual, const std::vector<double>& expected) {
  CHECK(actual.device() == kGpu);
  const std::vector<double> values = actual.to_vector<double>();
  REQUIRE(values.size() == expected.size());
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i);
    CHECK(values[i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }
}

// Largest |gpu - cpu| relative to max(1, max |cpu|).
double relative_error(const Tensor& gpu, const Tensor& cpu) {
  const std::vector<double> a = gpu.to_vector<double>(), b = cpu.to_vector<double>();
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 1;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst / scale;
}

// The output of conv2d and the gradients of sum(output * weights) for input, kernel and bias.
std::vector<Tensor> conv_and_gradients(const Tensor& x, const Tensor& k, const Tensor& b,
                                       const Tensor& weights, const Conv2DParams& params) {
  Tensor xi = x.detach().set_requires_grad(true), ki = k.detach().set_requires_grad(true),
         bi = b.detach().set_requires_grad(true);
  Tensor y = conv2d(xi, ki, bi, params);
  std::vector<Tensor> result = gradients(sum(mul(y, weights)), {xi, ki, bi});
  result.insert(result.begin(), y);
  return result;
}

}  // namespace

TEST_CASE("gpu: conv2d puts the odd 'same' padding element at the bottom/right") {
  // A 1x6 row and a 1x3 window of ones at stride 2: windows [1 2 3], [3 4 5], [5 6 0].
  Tensor x = image({1, 2, 3, 4, 5, 6}, 1, 6);
  Tensor ones = Tensor::ones({1, 3, 1, 1}).to(kGpu);
  check_close(conv2d(x, ones, Tensor(), {.strides = {1, 2}, .padding = Padding::kSame}),
              {6, 12, 11});
  // A 3x3 image and a 2x2 window at stride 1: one zero row and column at the bottom/right.
  Tensor y = conv2d(image({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3), Tensor::ones({2, 2, 1, 1}).to(kGpu),
                    Tensor(), {.padding = Padding::kSame});
  check_close(y, {12, 16, 9, 24, 28, 15, 15, 17, 9});
  // Its input gradient for a gradient of ones: how many windows cover each pixel.
  Tensor xi = image({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3).set_requires_grad(true);
  Tensor out =
      conv2d(xi, Tensor::ones({2, 2, 1, 1}).to(kGpu), Tensor(), {.padding = Padding::kSame});
  backward(sum(out));
  check_close(xi.grad(), {1, 2, 2, 2, 4, 4, 2, 4, 4});
}

TEST_CASE("gpu: conv2d of realistic shapes matches the CPU reference, forward and backward") {
  struct Shape4 {
    Shape input, kernel;
    Conv2DParams params;
  };
  const Shape4 shapes[] = {
      {{8, 32, 32, 64}, {3, 3, 64, 64}, {.padding = Padding::kSame}},
      {{8, 32, 32, 64}, {3, 3, 64, 128}, {.strides = {2, 2}, .padding = Padding::kSame}},
      {{4, 28, 28, 3}, {5, 5, 3, 32}, {.activation = Activation::kRelu}},
      {{4, 16, 16, 64}, {1, 1, 64, 256}, {.strides = {2, 2}}},
  };
  Generator generator(7);
  for (const Shape4& s : shapes) {
    INFO("input " << shape_str(s.input) << ", kernel " << shape_str(s.kernel));
    const Tensor x = random_uniform(s.input, -1, 1, generator);
    const Tensor k = random_uniform(s.kernel, -0.2, 0.2, generator);
    const Tensor b = random_uniform({s.kernel[3]}, -0.5, 0.5, generator);
    const Shape out{
        s.input[0],
        conv_output_size(s.input[1], s.kernel[0], s.params.strides[0], 1, s.params.padding),
        conv_output_size(s.input[2], s.kernel[1], s.params.strides[1], 1, s.params.padding),
        s.kernel[3]};
    const Tensor weights = random_uniform(out, -1, 1, generator);
    std::vector<Tensor> cpu = [&] {
      BackendGuard guard(Backend::kReference);
      return conv_and_gradients(x, k, b, weights, s.params);
    }();
    std::vector<Tensor> gpu =
        conv_and_gradients(x.to(kGpu), k.to(kGpu), b.to(kGpu), weights.to(kGpu), s.params);
    const char* what[] = {"output", "input gradient", "kernel gradient", "bias gradient"};
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO(what[i]);
      CHECK(relative_error(gpu[i], cpu[i]) < 1e-4);
    }
  }
}

TEST_CASE("gpu: conv2d in float64 matches the CPU, through cuDNN or the direct kernels") {
  Generator generator(8);
  const Tensor x = random_uniform({2, 7, 6, 3}, -1, 1, generator, DType::kF64);
  const Tensor k = random_uniform({3, 3, 3, 4}, -1, 1, generator, DType::kF64);
  const Tensor b = random_uniform({4}, -1, 1, generator, DType::kF64);
  const Tensor weights = random_uniform({2, 4, 3, 4}, -1, 1, generator, DType::kF64);
  const Conv2DParams params{.strides = {2, 2}, .padding = Padding::kSame};
  const std::vector<Tensor> cpu = conv_and_gradients(x, k, b, weights, params);
  const std::vector<Tensor> gpu =
      conv_and_gradients(x.to(kGpu), k.to(kGpu), b.to(kGpu), weights.to(kGpu), params);
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO("result " << i);
    CHECK(gpu[i].dtype() == DType::kF64);
    CHECK(relative_error(gpu[i], cpu[i]) < 1e-12);
  }
}

TEST_CASE("gpu: the direct convolution kernels (EST_CUDA_CONV_DIRECT=1) match the CPU too") {
  // Plans are made once per shape: these shapes appear nowhere else in this process.
  struct Shape4 {
    Shape input, kernel;
    Conv2DParams params;
  };
  const Shape4 shapes[] = {
      {{3, 11, 10, 5}, {3, 4, 5, 6}, {.strides = {2, 1}, .padding = Padding::kSame}},
      {{2, 13, 12, 3}, {3, 3, 3, 7}, {.padding = Padding::kSame, .dilations = {2, 2}}},
      {{2, 9, 9, 4}, {2, 2, 4, 3}, {.strides = {3, 3}}},
  };
  ::setenv("EST_CUDA_CONV_DIRECT", "1", 1);
  Generator generator(11);
  for (const Shape4& s : shapes) {
    INFO("input " << shape_str(s.input) << ", kernel " << shape_str(s.kernel));
    const Tensor x = random_uniform(s.input, -1, 1, generator);
    const Tensor k = random_uniform(s.kernel, -1, 1, generator);
    const Tensor b = random_uniform({s.kernel[3]}, -1, 1, generator);
    const Shape out{s.input[0],
                    conv_output_size(s.input[1], s.kernel[0], s.params.strides[0],
                                     s.params.dilations[0], s.params.padding),
                    conv_output_size(s.input[2], s.kernel[1], s.params.strides[1],
                                     s.params.dilations[1], s.params.padding),
                    s.kernel[3]};
    const Tensor weights = random_uniform(out, -1, 1, generator);
    std::vector<Tensor> cpu = [&] {
      BackendGuard guard(Backend::kReference);
      return conv_and_gradients(x, k, b, weights, s.params);
    }();
    std::vector<Tensor> gpu =
        conv_and_gradients(x.to(kGpu), k.to(kGpu), b.to(kGpu), weights.to(kGpu), s.params);
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO("result " << i);
      CHECK(relative_error(gpu[i], cpu[i]) < 1e-5);
    }
  }
  ::unsetenv("EST_CUDA_CONV_DIRECT");
}

TEST_CASE("gpu: a conv layer's steady-state training step allocates no GPU memory") {
  Generator generator(9);
  const Tensor x = random_uniform({4, 16, 16, 8}, -1, 1, generator).to(kGpu);
  Tensor k = random_uniform({3, 3, 8, 16}, -0.2, 0.2, generator).to(kGpu);
  Tensor b = Tensor::zeros({16}, DType::kF32, kGpu);
  auto step = [&] {
    Tensor ki = k.detach().set_requires_grad(true), bi = b.detach().set_requires_grad(true);
    Tensor y = conv2d(
        x, ki, bi, {.strides = {2, 2}, .padding = Padding::kSame, .activation = Activation::kRelu});
    Tensor pooled = max_pool2d(y, {.padding = Padding::kSame});
    Tensor loss = mean(mul(pooled, pooled));
    backward(loss);
    NoGradGuard no_grad;
    add_scaled_in_place(k, ki.grad(), -0.1);
    add_scaled_in_place(b, bi.grad(), -0.1);
    return loss.item();
  };
  for (int i = 0; i < 3; ++i) step();
  const AllocatorStats before = memory_stats(kGpu);
  for (int i = 0; i < 5; ++i) step();
  const AllocatorStats after = memory_stats(kGpu);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.allocations > before.allocations);
}

TEST_CASE("gpu: pooling ignores the padding and sends a tie's gradient to the first maximum") {
  Tensor x = image({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3);
  const Pool2DParams same{.padding = Padding::kSame};
  check_close(avg_pool2d(x, same), {3, 4.5, 7.5, 9});  // means of 4, 2, 2, 1 values
  check_close(max_pool2d(image({-1, -2, -3, -4, -5, -6, -7, -8, -9}, 3, 3), same),
              {-1, -3, -7, -9});  // the padding is not a zero
  // Two windows of four equal values: the gradient goes to the first of each (row-major).
  Tensor ties = image({5, 5, 1, 1, 5, 5, 1, 1}, 2, 4).set_requires_grad(true);
  Tensor y = max_pool2d(ties, {});
  check_close(y, {5, 1});
  backward(y, Tensor::from_vector<float>({2, 3}, {1, 1, 2, 1}).to(kGpu));
  check_close(ties.grad(), {2, 0, 3, 0, 0, 0, 0, 0});
  // Average pooling's gradient over SAME windows: 1 / the window's in-bounds count (4, 2, 2, 1).
  Tensor z = image({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3).set_requires_grad(true);
  backward(sum(avg_pool2d(z, same)));
  check_close(z.grad(), {0.25, 0.25, 0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1});
}

TEST_CASE("gpu: batch norm uses the batch mean and the biased variance, rank 2 and rank 4") {
  // Channel 0: 1, 2, 3, 6 (mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5); channel 1: -1, -1, 1,
  // 1 (mean 0, variance 1).
  const std::vector<float> values{1, -1, 2, -1, 3, 1, 6, 1};
  const Tensor gamma = Tensor::from_vector<float>({2, 1}).to(kGpu);
  const Tensor beta = Tensor::from_vector<float>({0.5f, -1}).to(kGpu);
  for (const Shape& shape : {Shape{4, 2}, Shape{1, 2, 2, 2}}) {
    INFO(shape_str(shape));
    const Tensor x = Tensor::from_vector(values, shape).to(kGpu);
    const BatchNormOutput out = batch_norm_training(x, gamma, beta, 0.0);
    check_close(out.batch_mean, {3, 0});
    check_close(out.batch_variance, {3.5, 1});
    const double s = 1 / std::sqrt(3.5);
    check_close(out.output,
                {2 * -2 * s + 0.5, -2, 2 * -1 * s + 0.5, -2, 0.5, 0, 2 * 3 * s + 0.5, 0});
  }
}

TEST_CASE("gpu: batch norm over many rows matches the CPU reference, forward and backward") {
  Generator generator(10);
  const Tensor x = random_uniform({64, 40, 40, 3}, 3, 5, generator);
  const Tensor gamma = random_uniform({3}, 0.5, 1.5, generator);
  const Tensor beta = random_uniform({3}, -1, 1, generator);
  const Tensor weights = random_uniform(x.shape(), -1, 1, generator);
  auto run = [&](Device device) {
    Tensor xi = x.to(device).detach().set_requires_grad(true),
           gi = gamma.to(device).detach().set_requires_grad(true),
           bi = beta.to(device).detach().set_requires_grad(true);
    const BatchNormOutput out = batch_norm_training(xi, gi, bi, 1e-3);
    std::vector<Tensor> result{out.output, out.batch_mean, out.batch_variance};
    for (const Tensor& g : gradients(sum(mul(out.output, weights.to(device))), {xi, gi, bi}))
      result.push_back(g);
    return result;
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(kGpu);
  const char* what[] = {"output",     "mean",           "variance",
                        "x gradient", "gamma gradient", "beta gradient"};
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(what[i]);
    CHECK(relative_error(gpu[i], cpu[i]) < 1e-5);
  }
}
