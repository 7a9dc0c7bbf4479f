// The tape: accumulation when a tensor is used twice, no_grad, gradients() and errors.
#include <doctest/doctest.h>

#include "ops/autograd.h"
#include "ops/math.h"

using namespace est;
using namespace est::ops;

TEST_CASE("a tensor used twice accumulates both gradients") {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}).set_requires_grad(true);
  Tensor y = sum(add(mul(x, x), x));  // d/dx = 2x + 1
  backward(y);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 5, 7});
  backward(y);  // accumulates into grad(), as PyTorch does
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 10, 14});
}

TEST_CASE("no_grad records nothing") {
  Tensor x = Tensor::from_vector<float>({1, 2}).set_requires_grad(true);
  Tensor y;
  {
    NoGradGuard guard;
    y = sum(mul(x, x));
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_AS(backward(y), InvalidArgumentError);
}

TEST_CASE("gradients() returns d loss / d source without touching grad()") {
  Tensor a = Tensor::from_vector<double>({2}).set_requires_grad(true);
  Tensor b = Tensor::from_vector<double>({5}).set_requires_grad(true);
  Tensor unused = Tensor::from_vector<double>({1}).set_requires_grad(true);
  Tensor h = mul(a, b);
  Tensor loss = sum(mul(h, a));  // a^2 b
  auto g = gradients(loss, {a, b, unused, h});
  CHECK(g[0].item() == doctest::Approx(20.0));
  CHECK(g[1].item() == doctest::Approx(4.0));
  CHECK(g[2].item() == 0.0);
  CHECK(g[3].item() == doctest::Approx(2.0));
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("backward needs a scalar loss") {
  Tensor x = Tensor::from_vector<float>({1, 2}).set_requires_grad(true);
  CHECK_THROWS_AS(backward(mul(x, x)), InvalidArgumentError);
  backward(mul(x, x), Tensor::ones({2}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("reshape passes gradients through") {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).set_requires_grad(true);
  backward(sum(mul(x.reshape({4}), Tensor::from_vector<double>({1, 2, 3, 4}))));
  CHECK(x.grad().shape() == Shape{2, 2});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 2, 3, 4});
}
