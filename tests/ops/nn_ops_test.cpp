// Semantic tests of ops/nn_ops.h: softmax and the cross-entropies against values computed with
// PyTorch (float64; torch.nn.functional.cross_entropy, binary_cross_entropy_with_logits,
// log_softmax), numerical stability at logits of 1e4, label checks, and dropout's scaling,
// seeding and gradient.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/ops.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {
void check_close(const Tensor& t, const std::vector<double>& expected, double tolerance = 1e-9) {
  auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": " << v[i] << " vs " << expected[i]);
    CHECK(std::fabs(v[i] - expected[i]) <= tolerance * std::max(1.0, std::fabs(expected[i])));
  }
}
}  // namespace

TEST_CASE("softmax matches PyTorch and stays finite at 1e4") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    INFO(backend_name(backend));
    Tensor logits = Tensor::from_vector<double>({1, 2, 3, -1, 0, 1e4}, {2, 3});
    check_close(softmax(logits), {0.090030573170, 0.244728471055, 0.665240955775, 0, 0, 1}, 1e-11);
    Tensor big = Tensor::from_vector<float>({1000, 0, -5});
    // float32 with values of 1000: oneDNN's vectorised exp/log are off by ~1e-6 absolute.
    check_close(log_softmax(big), {0, -1000, -1005}, 1e-5);
    check_close(softmax(Tensor::from_vector<float>({1e4f, 1e4f})), {0.5, 0.5}, 1e-6);
    // Softmax over axis 0 of [2, 2] normalises columns.
    check_close(sum(softmax(Tensor::from_vector<double>({1, 5, 2, -3}, {2, 2}), 0), {0}), {1, 1});
  }
}

TEST_CASE("sparse softmax cross-entropy matches PyTorch, gradient softmax - one_hot") {
  Tensor logits =
      Tensor::from_vector<double>({1e4, 0, -1e4, 1, 2, 3}, {2, 3}).set_requires_grad(true);
  Tensor labels = Tensor::from_vector<int64_t>({1, 2});
  Tensor loss = sparse_softmax_cross_entropy_with_logits(labels, logits);
  CHECK(loss.shape() == Shape{2});
  check_close(loss, {1e4, 0.4076059644444});
  backward(loss, Tensor::from_vector<double>({1, 2}));
  check_close(logits.grad(), {1, -1, 0, 0.180061146341, 0.489456942110, -0.669518088450});
  // float32 with int32 labels, logits of 1e4: finite.
  Tensor loss32 = sparse_softmax_cross_entropy_with_logits(
      Tensor::from_vector<int32_t>({0}), Tensor::from_vector<float>({1e4f, -1e4f}, {1, 2}));
  CHECK(loss32.item() == 0.0);
}

TEST_CASE("sparse softmax cross-entropy rejects bad labels by value, index and class count") {
  Tensor logits = Tensor::zeros({3, 4});
  std::string message = error_message<InvalidArgumentError>([&] {
    sparse_softmax_cross_entropy_with_logits(Tensor::from_vector<int64_t>({0, 7, 1}), logits);
  });
  CHECK(contains(message, "label 7 at index 1"));
  CHECK(contains(message, "4 classes"));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] {
        sparse_softmax_cross_entropy_with_logits(Tensor::from_vector<int32_t>({0, -1, 1}), logits);
      }),
      "label -1 at index 1"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { sparse_softmax_cross_entropy_with_logits(Tensor::zeros({3}), logits); }),
                 "labels must be int32 or int64, got float32"));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] {
        sparse_softmax_cross_entropy_with_logits(Tensor::from_vector<int64_t>({0, 1}), logits);
      }),
      "labels of shape [2] do not match logits of shape [3, 4]"));
}

TEST_CASE("softmax cross-entropy with probability labels matches PyTorch, both gradients") {
  Tensor logits =
      Tensor::from_vector<double>({0.5, -1, 2, 3, 0, -2}, {2, 3}).set_requires_grad(true);
  Tensor labels =
      Tensor::from_vector<double>({0.2, 0.3, 0.5, 1, 0, 0}, {2, 3}).set_requires_grad(true);
  Tensor loss = softmax_cross_entropy_with_logits(labels, logits);
  check_close(loss, {1.441311296657, 0.054985235377});
  auto g = gradients(sum(loss), {logits, labels});
  check_close(g[0], {-0.024709607860, -0.260887426729, 0.285597034589, -0.053500877447,
                     0.047123416525, 0.006377460922});
  check_close(g[1], {1.741311296657, 3.241311296657, 0.241311296657, 0.054985235377, 3.054985235377,
                     5.054985235377});
  // Zero classes: an empty sum, so every loss is 0.
  CHECK(softmax_cross_entropy_with_logits(Tensor::zeros({2, 0}), Tensor::zeros({2, 0}))
            .to_vector<float>() == std::vector<float>{0, 0});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   softmax_cross_entropy_with_logits(Tensor::zeros({2, 3}, DType::kF64),
                                                     Tensor::zeros({2, 4}, DType::kF64));
                 }),
                 "[2, 3] do not match logits of shape [2, 4]"));
}

TEST_CASE("sigmoid cross-entropy matches PyTorch and is stable for large logits") {
  Tensor logits = Tensor::from_vector<double>({-100, 0, 3, 50}).set_requires_grad(true);
  Tensor labels = Tensor::from_vector<double>({1, 0.5, 0, 1}).set_requires_grad(true);
  Tensor loss = sigmoid_cross_entropy_with_logits(labels, logits);
  check_close(loss, {100, 0.693147180560, 3.048587351574, 0});
  auto g = gradients(sum(loss), {logits, labels});
  check_close(g[0], {-1, 0, 0.952574126822, 0});
  check_close(g[1], {100, 0, -3, -50});
  Tensor huge = sigmoid_cross_entropy_with_logits(Tensor::from_vector<float>({0, 1}),
                                                  Tensor::from_vector<float>({1e4f, -1e4f}));
  check_close(huge, {1e4, 1e4}, 1e-6);
}

TEST_CASE("dropout scales kept elements, is seeded, and its gradient uses the same mask") {
  Tensor x = Tensor::full({200, 50}, 2.0, DType::kF64).set_requires_grad(true);
  Generator g1(42), g2(42), g3(43);
  Tensor a = dropout(x, 0.25, g1);
  Tensor b = dropout(x, 0.25, g2);
  Tensor c = dropout(x, 0.25, g3);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(a.to_vector<double>() != c.to_vector<double>());
  int64_t dropped = 0;
  for (double v : a.to_vector<double>()) {
    CHECK((v == 0.0 || v == doctest::Approx(2.0 / 0.75)));
    dropped += v == 0.0;
  }
  // 10000 Bernoulli(0.25) draws: mean 2500, sd 43.3; allow 6 sd.
  CHECK(std::abs(static_cast<double>(dropped) - 2500) < 260);
  auto grad = gradients(sum(a), {x})[0].to_vector<double>();
  auto out = a.to_vector<double>();
  for (size_t i = 0; i < grad.size(); ++i) {
    if (out[i] == 0.0)
      CHECK(grad[i] == 0.0);
    else
      CHECK(grad[i] == doctest::Approx(1.0 / 0.75));
  }
  // rate 0 returns the input itself.
  Generator g(1);
  CHECK(dropout(x, 0.0, g).shares_storage(x));
}

TEST_CASE("dropout rejects rates outside [0, 1)") {
  Tensor x = Tensor::ones({4});
  Generator g(0);
  for (double rate : {1.0, -0.1, 1.5, std::nan("")}) {
    std::string message = error_message<InvalidArgumentError>([&] { dropout(x, rate, g); });
    CHECK(contains(message, "dropout: rate must be in [0, 1)"));
  }
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { dropout(Tensor::ones({2}, DType::kI32), 0.5, g); }),
      "dropout"));
}
