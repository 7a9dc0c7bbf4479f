// conv2d followed by max_pool2d, fused (ops/conv_pool.h, ops/cpu/conv_max_pool.h) against the
// two ops run apart with the fusion off: outputs and kernel/bias gradients, on the tutorial
// CNN's first layer and on odd shapes (pooling's floor, channels other than 32, several input
// channels with `same` padding, a strided convolution, a 3x3 pool, no activation); the
// fallbacks; the deferred convolution output of the layers (ops/deferred_fill.h): computed when
// read, with the values of its call, dropped unread, pooled straight from its recipe.
#include <doctest/doctest.h>

#include <cstring>

#include "ops/conv_pool.h"
#include "ops/deferred_fill.h"
#include "ops/ops.h"

using namespace est;
using namespace est::ops;

namespace {

struct Case {
  Shape input;   // [N, H, W, C_in]
  Shape kernel;  // [KH, KW, C_in, C_out]
  Conv2DParams conv;
  Pool2DParams pool;
};

Conv2DParams relu_conv() { return {.activation = Activation::kRelu}; }

struct Result {
  Tensor output, grad_kernel, grad_bias;
};

// Output and the gradients of sum(output * weights) for kernel and bias; `fused` chooses the
// fused op or the two ops with the fusion off.
Result run(const Case& c, bool fused, uint64_t seed = 11) {
  Generator generator(seed);
  Tensor input = random_uniform(c.input, 0, 1, generator);
  Tensor kernel = random_uniform(c.kernel, -0.5, 0.5, generator).set_requires_grad(true);
  Tensor bias = random_uniform({c.kernel[3]}, -0.2, 0.2, generator).set_requires_grad(true);
  set_conv_pool_fusion(fused);
  Tensor out = fused ? conv2d_max_pool2d(input, kernel, bias, c.conv, c.pool)
                     : max_pool2d(conv2d(input, kernel, bias, c.conv), c.pool);
  set_conv_pool_fusion(true);
  Tensor weights = random_uniform(out.shape(), -1, 1, generator);
  std::vector<Tensor> grads = gradients(sum(mul(out, weights)), {kernel, bias});
  return {out.detach(), grads[0], grads[1]};
}

void check_close(const Tensor& actual, const Tensor& expected, double tolerance) {
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<float> a = actual.to_vector<float>(), e = expected.to_vector<float>();
  double scale = 0;
  for (float v : e) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << " of " << shape_str(actual.shape()));
    REQUIRE(std::abs(a[i] - e[i]) <= tolerance * std::max(scale, 1.0));
  }
}

void check_fused_matches(const Case& c) {
  const Result fused = run(c, true), apart = run(c, false);
  check_close(fused.output, apart.output, 1e-5);
  check_close(fused.grad_kernel, apart.grad_kernel, 1e-5);
  check_close(fused.grad_bias, apart.grad_bias, 1e-5);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("conv2d_max_pool2d equals conv2d then max_pool2d, forward and gradients") {
  SUBCASE("the tutorial CNN's first layer, a batch of 9") {
    check_fused_matches({{9, 28, 28, 1}, {3, 3, 1, 32}, relu_conv(), {}});
  }
  SUBCASE("odd spatial sizes: the pooling's floor drops the last row and column") {
    check_fused_matches({{3, 16, 14, 1}, {3, 3, 1, 16}, relu_conv(), {}});
  }
  SUBCASE("48 filters, three input channels, same padding") {
    Conv2DParams conv = relu_conv();
    conv.padding = Padding::kSame;
    check_fused_matches({{2, 9, 11, 3}, {3, 3, 3, 48}, conv, {}});
  }
  SUBCASE("a strided 5x5 convolution without activation, a 3x3 pool") {
    Conv2DParams conv{.strides = {2, 1}};
    check_fused_matches({{4, 21, 17, 2}, {5, 5, 2, 16}, conv, {{3, 3}, {3, 3}, Padding::kValid}});
  }
  SUBCASE("a dilated convolution, a 2x3 pool") {
    Conv2DParams conv = relu_conv();
    conv.dilations = {2, 2};
    check_fused_matches({{1, 15, 15, 1}, {3, 3, 1, 32}, conv, {{2, 3}, {2, 3}, Padding::kValid}});
  }
}

TEST_CASE("conv2d_max_pool2d is deterministic across runs and thread counts") {
  const Case c{{37, 28, 28, 1}, {3, 3, 1, 32}, relu_conv(), {}};
  const int previous = num_threads();
  set_num_threads(1);
  const Result one = run(c, true);
  set_num_threads(2);
  const Result two = run(c, true);
  set_num_threads(previous);
  CHECK(bitwise_equal(one.output, two.output));
  CHECK(bitwise_equal(one.grad_kernel, two.grad_kernel));
  CHECK(bitwise_equal(one.grad_bias, two.grad_bias));
}

TEST_CASE("conv2d_max_pool2d falls back to the two ops where the fused kernel does not apply") {
  Generator generator(5);
  Tensor kernel = random_uniform({3, 3, 1, 16}, -1, 1, generator);
  Tensor bias = random_uniform({16}, -1, 1, generator);
  Tensor input = random_uniform({2, 10, 10, 1}, 0, 1, generator).set_requires_grad(true);
  SUBCASE("the input needs a gradient") {
    Tensor out = conv2d_max_pool2d(input, kernel, bias, relu_conv(), {});
    Tensor expected = max_pool2d(conv2d(input, kernel, bias, relu_conv()), {});
    CHECK(bitwise_equal(out.detach(), expected.detach()));
    CHECK(bitwise_equal(gradients(sum(out), {input})[0], gradients(sum(expected), {input})[0]));
  }
  SUBCASE("overlapping windows, padded pooling, too many filters per lane") {
    Tensor x = input.detach();
    for (const Pool2DParams& pool : {Pool2DParams{{3, 3}, {2, 2}, Padding::kValid},
                                     Pool2DParams{{2, 2}, {2, 2}, Padding::kSame}})
      CHECK(bitwise_equal(conv2d_max_pool2d(x, kernel, bias, relu_conv(), pool),
                          max_pool2d(conv2d(x, kernel, bias, relu_conv()), pool)));
    Tensor k12 = random_uniform({3, 3, 1, 12}, -1, 1, generator);
    CHECK(bitwise_equal(conv2d_max_pool2d(x, k12, Tensor(), relu_conv(), {}),
                        max_pool2d(conv2d(x, k12, Tensor(), relu_conv()), {})));
  }
  SUBCASE("errors are the two ops' own") {
    CHECK_THROWS_AS(
        conv2d_max_pool2d(input.detach(), random_uniform({3, 3, 2, 16}, 0, 1, generator), bias,
                          relu_conv(), {}),
        InvalidArgumentError);
    CHECK_THROWS_AS(conv2d_max_pool2d(random_uniform({1, 3, 3, 1}, 0, 1, generator), kernel, bias,
                                      relu_conv(), {{2, 2}, {2, 2}, Padding::kValid}),
                    InvalidArgumentError);
  }
}

TEST_CASE("a deferred conv2d output is computed when read, with the values of its call") {
  Generator generator(7);
  Tensor input = random_uniform({3, 12, 12, 1}, 0, 1, generator);
  Tensor kernel = random_uniform({3, 3, 1, 16}, -1, 1, generator);
  Tensor bias = random_uniform({16}, -1, 1, generator);
  const Tensor expected = conv2d(input, kernel, bias, relu_conv());
  const int64_t pending = pending_deferred_fills();
  Tensor deferred = conv2d_deferred(input, kernel, bias, relu_conv());
  CHECK(pending_deferred_fills() == pending + 1);
  kernel.fill(0.0);                       // an optimizer's in-place update after the call
  Tensor view = reshape(deferred, {-1});  // a handle on the same storage: reading it computes it
  check_close(view, reshape(expected, {-1}), 1e-5);
  CHECK(pending_deferred_fills() == pending);
  check_close(deferred, expected, 1e-5);
  { Tensor dropped = conv2d_deferred(input, kernel, bias, relu_conv()); }
  CHECK(pending_deferred_fills() == pending);  // unread and gone: never computed
}

TEST_CASE("max_pool2d_after pools a deferred conv2d output from its recipe, gradients included") {
  Generator generator(9);
  Tensor input = random_uniform({5, 13, 13, 1}, 0, 1, generator);
  Tensor kernel = random_uniform({3, 3, 1, 32}, -1, 1, generator).set_requires_grad(true);
  Tensor bias = random_uniform({32}, -1, 1, generator).set_requires_grad(true);
  Tensor weights = random_uniform({5, 5, 5, 32}, -1, 1, generator);
  const Pool2DParams pool{};
  auto loss_of = [&](const Tensor& pooled) { return sum(mul(pooled, weights)); };
  set_conv_pool_fusion(false);
  Tensor apart = max_pool2d(conv2d(input, kernel, bias, relu_conv()), pool);
  std::vector<Tensor> expected = gradients(loss_of(apart), {kernel, bias});
  set_conv_pool_fusion(true);
  const int64_t pending = pending_deferred_fills();

  SUBCASE("pooled straight after: never computed") {
    Tensor y = conv2d_deferred(input, kernel, bias, relu_conv());
    Tensor pooled = max_pool2d_after(y, pool);
    CHECK(pending_deferred_fills() == pending + 1);  // y itself is still pending
    check_close(pooled, apart, 1e-5);
    std::vector<Tensor> got = gradients(loss_of(pooled), {kernel, bias});
    check_close(got[0], expected[0], 1e-5);
    check_close(got[1], expected[1], 1e-5);
    CHECK(pending_deferred_fills() == pending + 1);
    y = Tensor();
    CHECK(pending_deferred_fills() == pending);
  }
  SUBCASE("also read elsewhere: both paths' gradients add up") {
    Tensor y = conv2d_deferred(input, kernel, bias, relu_conv());
    Tensor loss = add(loss_of(max_pool2d_after(y, pool)), sum(y));
    set_conv_pool_fusion(false);
    Tensor y2 = conv2d(input, kernel, bias, relu_conv());
    Tensor loss2 = add(loss_of(max_pool2d(y2, pool)), sum(y2));
    set_conv_pool_fusion(true);
    check_close(loss, loss2, 1e-5);
    std::vector<Tensor> got = gradients(loss, {kernel, bias});
    std::vector<Tensor> want = gradients(loss2, {kernel, bias});
    check_close(got[0], want[0], 1e-5);
    check_close(got[1], want[1], 1e-5);
  }
  SUBCASE("a detached handle pools without a gradient to the kernel") {
    Tensor y = conv2d_deferred(input, kernel, bias, relu_conv());
    Tensor pooled = max_pool2d_after(y.detach(), pool);
    check_close(pooled, apart, 1e-5);
    CHECK(pooled.grad_node() == nullptr);
  }
  SUBCASE("without recording (evaluation)") {
    NoGradGuard no_grad;
    Tensor pooled = max_pool2d_after(conv2d_deferred(input, kernel, bias, relu_conv()), pool);
    check_close(pooled, apart, 1e-5);
    CHECK(pending_deferred_fills() == pending);
  }
}
