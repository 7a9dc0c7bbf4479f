// Semantic tests of the heavy kernels, run on every CPU backend: TensorFlow's padding arithmetic
// (checked through hand-computed convolutions and pools, where the side of the odd padding
// element changes the result), output shapes, average pooling that excludes padding, batch norm
// statistics, error messages, and the steady state of a training step (no new primitive, no
// system allocation). Gradients against finite differences live in op_cases_kernels.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/allocator.h"
#include "ops/ops.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {

// [1, H, W, 1] image holding `values` row by row.
Tensor image(const std::vector<float>& values, int64_t h, int64_t w) {
  return Tensor::from_vector(values, {1, h, w, 1});
}

std::vector<float> values_of(const Tensor& t) { return t.to_vector<float>(); }

void check_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }
}

}  // namespace

TEST_CASE("conv_output_size follows TensorFlow") {
  CHECK(conv_output_size(7, 3, 2, 1, Padding::kSame) == 4);   // ceil(7 / 2)
  CHECK(conv_output_size(7, 3, 2, 1, Padding::kValid) == 3);  // (7 - 3) / 2 + 1
  CHECK(conv_output_size(7, 3, 1, 2, Padding::kValid) == 3);  // dilated window of 5
  CHECK(conv_output_size(7, 3, 1, 2, Padding::kSame) == 7);
  CHECK(conv_output_size(2, 4, 1, 1, Padding::kSame) == 2);  // window larger than input
  CHECK(conv_output_size(5, 5, 3, 1, Padding::kValid) == 1);
  std::string message =
      error_message<InvalidArgumentError>([] { conv_output_size(4, 3, 1, 2, Padding::kValid); });
  CHECK(contains(message, "does not fit an input of 4"));
  CHECK(contains(
      error_message<InvalidArgumentError>([] { conv_output_size(4, 3, 0, 1, Padding::kSame); }),
      "must all be at least 1"));
}

TEST_CASE("conv2d puts the odd 'same' padding element at the end, on every backend") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    // A 1x6 row convolved with a 1x3 window of ones, stride 2: out = ceil(6/2) = 3, pad_total =
    // 1, all of it on the right: windows [1 2 3], [3 4 5], [5 6 0].
    Tensor x = image({1, 2, 3, 4, 5, 6}, 1, 6);
    Tensor k = Tensor::ones({1, 3, 1, 1});
    Tensor y = conv2d(x, k, Tensor(), {.strides = {1, 2}, .padding = Padding::kSame});
    CHECK(y.shape() == Shape{1, 1, 3, 1});
    check_close(values_of(y), {6, 12, 11});
    // Dilation 2, stride 1: the window is x[i-2] + x[i] + x[i+2], padding 2 on each side.
    Tensor x7 = image({1, 2, 3, 4, 5, 6, 7}, 1, 7);
    Tensor y7 = conv2d(x7, k, Tensor(), {.padding = Padding::kSame, .dilations = {1, 2}});
    check_close(values_of(y7), {4, 6, 9, 12, 15, 10, 12});
    // Valid, stride 2 over 5 columns with dilation 2 gives one window: 1 + 3 + 5.
    Tensor y5 =
        conv2d(image({1, 2, 3, 4, 5}, 1, 5), k, Tensor(), {.strides = {1, 2}, .dilations = {1, 2}});
    check_close(values_of(y5), {9});
  }
}

TEST_CASE("conv2d adds the bias before the activation and maps channels as HWIO") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    // One pixel, two input channels [1, 2]; kernel [1, 1, 2, 2]: out0 = 1*1 + 2*3, out1 = 1*2 +
    // 2*4.
    Tensor x = Tensor::from_vector<float>({1, 2}, {1, 1, 1, 2});
    Tensor k = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
    Tensor bias = Tensor::from_vector<float>({-10, 1});
    check_close(values_of(conv2d(x, k, bias, {})), {-3, 11});
    check_close(values_of(conv2d(x, k, bias, {.activation = Activation::kRelu})), {0, 11});
    // Cross-correlation, not flipped: kernel rows/columns line up with the window's.
    Tensor row = image({1, 2, 3, 4}, 1, 4);
    Tensor k_row = Tensor::from_vector<float>({1, 10, 100}, {1, 3, 1, 1});
    check_close(values_of(conv2d(row, k_row, Tensor(), {})), {321, 432});
    Tensor column = image({1, 2, 3}, 3, 1);
    Tensor k_column = Tensor::from_vector<float>({1, 10}, {2, 1, 1, 1});
    check_close(values_of(conv2d(column, k_column, Tensor(), {})), {21, 32});
  }
}

TEST_CASE("conv2d output shapes") {
  Tensor x = Tensor::zeros({2, 9, 8, 3});
  auto shape_of = [&](Shape kernel, Conv2DParams params) {
    return conv2d(x, Tensor::zeros(kernel), Tensor(), params).shape();
  };
  CHECK(shape_of({3, 3, 3, 5}, {}) == Shape{2, 7, 6, 5});
  CHECK(shape_of({3, 3, 3, 5}, {.padding = Padding::kSame}) == Shape{2, 9, 8, 5});
  CHECK(shape_of({3, 3, 3, 5}, {.strides = {2, 3}, .padding = Padding::kSame}) ==
        Shape{2, 5, 3, 5});
  CHECK(shape_of({3, 2, 3, 4}, {.strides = {2, 2}}) == Shape{2, 4, 4, 4});
  CHECK(shape_of({3, 3, 3, 1}, {.dilations = {2, 3}}) == Shape{2, 5, 2, 1});
  CHECK(max_pool2d(x, {}).shape() == Shape{2, 4, 4, 3});
  CHECK(avg_pool2d(x, {.padding = Padding::kSame}).shape() == Shape{2, 5, 4, 3});
  CHECK(max_pool2d(x, {.window = {3, 3}, .strides = {1, 1}}).shape() == Shape{2, 7, 6, 3});
}

TEST_CASE("pooling with 'same' padding ignores the padding, on every backend") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    // 3x3 image, 2x2 windows, stride 2: out 2x2, the padding row/column at the bottom/right.
    Tensor x = image({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3);
    Pool2DParams same{.padding = Padding::kSame};
    check_close(values_of(avg_pool2d(x, same)), {3, 4.5, 7.5, 9});  // means of 4, 2, 2, 1 values
    Tensor negative = image({-1, -2, -3, -4, -5, -6, -7, -8, -9}, 3, 3);
    check_close(values_of(max_pool2d(negative, same)), {-1, -3, -7, -9});  // padding is not 0
    // Overlapping 2x2 windows with stride 1, valid.
    check_close(values_of(avg_pool2d(x, {.strides = {1, 1}})), {3, 4, 6, 7});
  }
}

TEST_CASE("max pooling sends the gradient to each window's maximum, on every backend") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    Tensor x = image({1, 9, 2, 3, 4, 5, 8, 6, 7, 0, 1, 2, 3, 4, 5, 6}, 4, 4);
    x.set_requires_grad(true);
    Tensor y = max_pool2d(x, {});
    check_close(values_of(y), {9, 8, 7, 6});
    Tensor grad = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 2, 2, 1});
    backward(y, grad);
    check_close(values_of(x.grad()), {0, 1, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 4});
    // Average pooling spreads it evenly.
    Tensor z = Tensor::zeros({1, 4, 4, 1}).set_requires_grad(true);
    backward(avg_pool2d(z, {}), grad);
    check_close(values_of(z.grad()),
                {.25, .25, .5, .5, .25, .25, .5, .5, .75, .75, 1, 1, .75, .75, 1, 1});
  }
}

TEST_CASE("the gradient runs on the backend the forward pass used") {
  if (!backend_available(Backend::kOneDnn))
    return est::testing::skip("this build has no oneDNN (configured with -Donednn=disabled)");
  Tensor x = image({1, 9, 2, 3, 4, 5, 8, 6, 7, 0, 1, 2, 3, 4, 5, 6}, 4, 4);
  x.set_requires_grad(true);
  Tensor y;
  {
    BackendGuard guard(Backend::kOneDnn);
    y = max_pool2d(x, {});
  }
  BackendGuard guard(Backend::kReference);
  backward(y, Tensor::ones({1, 2, 2, 1}));
  check_close(values_of(x.grad()), {0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
}

TEST_CASE("batch norm uses the batch mean and the biased variance, on every backend") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    // Channel 0: 1, 2, 3, 6 (mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5);
    // channel 1: -1, -1, 1, 1 (mean 0, variance 1).
    Tensor x = Tensor::from_vector<float>({1, -1, 2, -1, 3, 1, 6, 1}, {4, 2});
    Tensor gamma = Tensor::from_vector<float>({2, 1});
    Tensor beta = Tensor::from_vector<float>({0.5f, -1});
    const double epsilon = 0.5;
    BatchNormOutput out = batch_norm_training(x, gamma, beta, epsilon);
    check_close(values_of(out.batch_mean), {3, 0});
    check_close(values_of(out.batch_variance), {3.5, 1});
    const float s0 = 2 / std::sqrt(4.0f), s1 = 1 / std::sqrt(1.5f);  // gamma / sqrt(var + eps)
    check_close(values_of(out.output), {-2 * s0 + 0.5f, -s1 - 1, -1 * s0 + 0.5f, -s1 - 1, 0.5f,
                                        s1 - 1, 3 * s0 + 0.5f, s1 - 1});
    // Inference with given statistics: (x - mean) / sqrt(var + eps) * gamma + beta.
    Tensor mean = Tensor::from_vector<float>({1, 1});
    Tensor variance = Tensor::from_vector<float>({3.5, 0.5});
    Tensor y = batch_norm_inference(x, gamma, beta, mean, variance, epsilon);
    const float t1 = 1.0f;  // 1 / sqrt(0.5 + 0.5)
    check_close(values_of(y), {0.5f, -2 * t1 - 1, 1 * s0 + 0.5f, -2 * t1 - 1, 2 * s0 + 0.5f, -1,
                               5 * s0 + 0.5f, -1});
  }
}

TEST_CASE("batch norm honours tiny epsilons, each its own") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    // Variance 1e-7: x / sqrt(var + eps) is 1/sqrt(2) with eps 1e-7 and 1/sqrt(3) with 2e-7.
    const float a = std::sqrt(1e-7f);
    Tensor x = Tensor::from_vector<float>({-a, a}, {2, 1});
    for (auto [epsilon, expected] :
         {std::pair{1e-7, 1 / std::sqrt(2.0f)}, std::pair{2e-7, 1 / std::sqrt(3.0f)}}) {
      Tensor y = batch_norm_training(x, Tensor(), Tensor(), epsilon).output;
      CHECK(y.to_vector<float>()[1] == doctest::Approx(expected).epsilon(1e-3));
    }
  }
}

TEST_CASE("matmul multiplies as written, on every backend") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
    Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2});
    check_close(values_of(matmul(a, b)), {19, 22, 43, 50});
    check_close(values_of(matmul(a, b, true, false)), {26, 30, 38, 44});
    check_close(values_of(matmul(a, b, false, true)), {17, 23, 39, 53});
    Tensor kernel = Tensor::from_vector<float>({1, -1, 2, -2}, {2, 2});
    Tensor bias = Tensor::from_vector<float>({0, 10});
    check_close(values_of(linear(a, kernel, bias, Activation::kRelu)), {5, 5, 11, 0});
  }
}

TEST_CASE("kernels reject wrong ranks, shapes and channels with a clear message") {
  auto invalid = [](auto fn) { return error_message<InvalidArgumentError>(fn); };
  Tensor x = Tensor::zeros({2, 8, 8, 3});
  CHECK(contains(invalid([&] {
                   conv2d(x, Tensor::zeros({3, 3, 1, 32}), Tensor(), {});
                 }),
                 "conv2d: input has 3 channels but kernel [3, 3, 1, 32] expects 1"));
  CHECK(contains(invalid([&] {
                   conv2d(Tensor::zeros({8, 8, 3}), Tensor::zeros({3, 3, 3, 4}), Tensor(), {});
                 }),
                 "conv2d: input must have rank 4"));
  CHECK(contains(invalid([&] {
                   conv2d(x, Tensor::zeros({3, 3, 3}), Tensor(), {});
                 }),
                 "kernel must have rank 4"));
  CHECK(contains(invalid([&] {
                   conv2d(x, Tensor::zeros({3, 3, 3, 4}), Tensor::zeros({5}), {});
                 }),
                 "bias [5] does not match kernel [3, 3, 3, 4]"));
  CHECK(contains(invalid([&] {
                   conv2d(x, Tensor::zeros({9, 9, 3, 4}), Tensor(), {});
                 }),
                 "does not fit an input of 8"));
  CHECK(contains(invalid([&] {
                   conv2d(x, Tensor::zeros({3, 3, 3, 4}, DType::kF64), Tensor(), {});
                 }),
                 "input is float32 but kernel is float64"));
  CHECK(contains(invalid([&] {
                   max_pool2d(Tensor::zeros({8, 8}), {});
                 }),
                 "max_pool2d: input must have rank 4"));
  CHECK(contains(invalid([&] { avg_pool2d(x, {.window = {0, 2}}); }), "avg_pool2d"));
  CHECK(contains(invalid([&] {
                   matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
                 }),
                 "matmul: inner dimensions differ"));
  CHECK(contains(invalid([&] {
                   matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4}));
                 }),
                 "batch dimensions differ"));
  CHECK(contains(invalid([&] {
                   matmul(Tensor::zeros({3}), Tensor::zeros({3, 4}));
                 }),
                 "rank 2 or more"));
  CHECK(contains(invalid([&] {
                   linear(Tensor::zeros({2, 5}), Tensor::zeros({4, 3}), Tensor());
                 }),
                 "linear: x [2, 5] has 5 features but kernel [4, 3] expects 4"));
  CHECK(contains(invalid([&] {
                   linear(Tensor::zeros({2, 4}), Tensor::zeros({4, 3}), Tensor::zeros({4}));
                 }),
                 "bias [4] does not match kernel [4, 3]"));
  CHECK(contains(invalid([&] { bias_add(x, Tensor::zeros({4})); }), "one value per channel"));
  CHECK(contains(invalid([&] {
                   matmul(Tensor::zeros({2, 2}, DType::kI32), Tensor::zeros({2, 2}, DType::kI32));
                 }),
                 "expected a float32, float64 or bfloat16 tensor"));
  CHECK(contains(invalid([&] {
                   batch_norm_training(Tensor::zeros({4, 3}), Tensor::ones({2}), Tensor(), 1e-3);
                 }),
                 "gamma has shape [2] but x [4, 3] has 3 channels"));
  CHECK(
      contains(invalid([&] { batch_norm_training(Tensor::zeros({4}), Tensor(), Tensor(), 1e-3); }),
               "rank 2 or more"));
  CHECK(contains(invalid([&] {
                   batch_norm_inference(Tensor::zeros({4, 3}), Tensor(), Tensor(), Tensor(),
                                        Tensor::ones({3}), 1e-3);
                 }),
                 "mean and variance are required"));
}

namespace {

// One forward + backward of a small CNN: a first conv layer (no input gradient), a second one
// (backward-data too), max pooling, flatten, linear. Gradients are cleared so nothing
// accumulates across calls.
struct SmallCnn {
  Tensor images, kernel1, bias1, kernel2, dense_kernel, dense_bias;

  void step() {
    Tensor h = conv2d(images, kernel1, bias1, {.activation = Activation::kRelu});
    h = conv2d(h, kernel2, Tensor(), {.padding = Padding::kSame, .activation = Activation::kTanh});
    h = max_pool2d(h, {});
    h = h.reshape({h.dim(0), -1});
    Tensor out = linear(h, dense_kernel, dense_bias, Activation::kRelu);
    backward(out, Tensor::ones(out.shape()));
    for (Tensor* t : {&kernel1, &bias1, &kernel2, &dense_kernel, &dense_bias})
      t->set_grad(Tensor());
  }
};

}  // namespace

TEST_CASE("a steady-state training step builds no primitive and allocates no memory") {
  Generator generator(7);
  auto parameter = [&](Shape shape) {
    return random_uniform(shape, -1, 1, generator).set_requires_grad(true);
  };
  SmallCnn cnn{random_uniform({4, 10, 10, 1}, 0, 1, generator),
               parameter({3, 3, 1, 16}),
               parameter({16}),
               parameter({3, 3, 16, 8}),
               parameter({128, 5}),
               parameter({5})};
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    cnn.step();
    const KernelCacheStats cache = kernel_cache_stats();
    const AllocatorStats memory = allocator_for(Device::cpu()).stats();
    for (int i = 0; i < 3; ++i) cnn.step();
    CHECK(kernel_cache_stats().created == cache.created);
    CHECK(allocator_for(Device::cpu()).stats().system_allocations == memory.system_allocations);
    if (backend == Backend::kOneDnn) CHECK(kernel_cache_stats().hits > cache.hits);
  }
}

TEST_CASE("a repeated batch norm or matmul builds no new primitive") {
  if (!backend_available(Backend::kOneDnn))
    return est::testing::skip("this build has no oneDNN (configured with -Donednn=disabled)");
  BackendGuard guard(Backend::kOneDnn);
  Generator generator(3);
  Tensor x = random_uniform({4, 3, 3, 5}, -1, 1, generator).set_requires_grad(true);
  Tensor gamma = Tensor::ones({5}).set_requires_grad(true);
  Tensor a = random_uniform({2, 3, 4}, -1, 1, generator).set_requires_grad(true);
  Tensor b = random_uniform({4, 6}, -1, 1, generator).set_requires_grad(true);
  auto step = [&] {
    backward(batch_norm_training(x, gamma, Tensor(), 1e-3).output, Tensor::ones(x.shape()));
    backward(matmul(a, b, false, false), Tensor::ones({2, 3, 6}));
  };
  step();
  const int64_t created = kernel_cache_stats().created;
  step();
  CHECK(kernel_cache_stats().created == created);
}
