// Semantic tests of ops/math.h beyond the harness: broadcasting results and rules, dtype rules,
// error messages, reductions (ties, empty axes, large tensors on the threaded paths), gradients
// through broadcasting, the oneDNN primitive cache and the no-reference-cycle rule of record().
// Expected values are computed by hand or by plain loops written here.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "ops/ops.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("binary ops broadcast as NumPy does") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = Tensor::from_vector<float>({10, 20, 30});
  Tensor column = Tensor::from_vector<float>({100, 200}, {2, 1});
  CHECK(values(add(a, row)) == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK(values(sub(a, column)) == std::vector<double>{-99, -98, -97, -196, -195, -194});
  CHECK(values(mul(row, column)) ==
        std::vector<double>{1000, 2000, 3000, 2000, 4000, 6000});  // [3] * [2, 1] -> [2, 3]
  CHECK(mul(row, column).shape() == Shape{2, 3});
  CHECK(values(div(a, Tensor::scalar(2))) == std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3});
  CHECK(values(maximum(a, Tensor::scalar(3.5))) == std::vector<double>{3.5, 3.5, 3.5, 4, 5, 6});
  CHECK(values(minimum(a, row)) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(values(squared_difference(a, Tensor::scalar(2))) == std::vector<double>{1, 0, 1, 4, 9, 16});
  CHECK(values(pow(a, 2.0)) == std::vector<double>{1, 4, 9, 16, 25, 36});
  CHECK(values(add(a, 0.5)) == std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  CHECK(values(2.0 * a) == std::vector<double>{2, 4, 6, 8, 10, 12});
  // Rank-3 against rank-2 with size-1 dims on both sides.
  Tensor x = Tensor::from_vector<double>({1, 2}, {2, 1, 1});
  Tensor y = Tensor::from_vector<double>({10, 20, 30}, {1, 3});
  CHECK(add(x, y).shape() == Shape{2, 1, 3});
  CHECK(values(add(x, y)) == std::vector<double>{11, 21, 31, 12, 22, 32});
  CHECK(broadcast_shapes({5, 1, 4}, {3, 1}) == Shape{5, 3, 4});
}

TEST_CASE("integer tensors support add, sub, mul, maximum and comparisons") {
  Tensor a = Tensor::from_vector<int32_t>({1, -2, 3});
  Tensor b = Tensor::from_vector<int32_t>({4, 5, -6});
  CHECK(add(a, b).dtype() == DType::kI32);
  CHECK(add(a, b).to_vector<int32_t>() == std::vector<int32_t>{5, 3, -3});
  CHECK(sub(a, b).to_vector<int32_t>() == std::vector<int32_t>{-3, -7, 9});
  CHECK(mul(a, b).to_vector<int32_t>() == std::vector<int32_t>{4, -10, -18});
  CHECK(maximum(a, b).to_vector<int32_t>() == std::vector<int32_t>{4, 5, 3});
  CHECK(neg(a).to_vector<int32_t>() == std::vector<int32_t>{-1, 2, -3});
  Tensor big = Tensor::from_vector<int64_t>({int64_t{1} << 40, 3});
  CHECK(add(big, Tensor::scalar(1, DType::kI64)).to_vector<int64_t>() ==
        std::vector<int64_t>{(int64_t{1} << 40) + 1, 4});
  CHECK(equal(a, Tensor::scalar(3, DType::kI32)).dtype() == DType::kBool);
  CHECK(equal(a, Tensor::scalar(3, DType::kI32)).to_vector<int>() == std::vector<int>{0, 0, 1});
  CHECK(greater(a, b).to_vector<int>() == std::vector<int>{0, 0, 1});
  CHECK(less(a, b).to_vector<int>() == std::vector<int>{1, 1, 0});
  CHECK(sum(a).dtype() == DType::kI32);
  CHECK(sum(a).item() == 2);
  CHECK(max(b).item() == 5);
  CHECK(argmax(b, 0).item() == 1);
}

TEST_CASE("dtype rules are errors naming the op and both dtypes") {
  Tensor f = Tensor::ones({2});
  Tensor d = Tensor::ones({2}, DType::kF64);
  Tensor i = Tensor::ones({2}, DType::kI32);
  std::string message = error_message<InvalidArgumentError>([&] { add(f, d); });
  CHECK(contains(message, "add"));
  CHECK(contains(message, "float32"));
  CHECK(contains(message, "float64"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { div(i, i); }),
                 "div: expected a float32, float64 or bfloat16 tensor, got int32"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { exp(i); }), "exp"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { mean(i); }), "mean"));
  Tensor flags = Tensor::ones({2}, DType::kBool);
  CHECK(contains(error_message<InvalidArgumentError>([&] { sum(flags); }),
                 "sum: not defined for bool"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { add(flags, flags); }), "bool"));
  CHECK(equal(flags, flags).to_vector<int>() == std::vector<int>{1, 1});
}

TEST_CASE("incompatible shapes name the op and both shapes") {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({4});
  std::string message = error_message<InvalidArgumentError>([&] { add(a, b); });
  CHECK(contains(message, "add: shapes [2, 3] and [4] are not broadcast-compatible"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { mul(a, b); }),
                 "mul: shapes [2, 3] and [4]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { greater(a, b); }), "greater: shapes"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { broadcast_shapes({3}, {2}); }),
                 "[3] and [2]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   broadcast_to(a, {3, 3});
                 }),
                 "broadcast_to"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   broadcast_to(a, {2, 1});
                 }),
                 "cannot be broadcast to [2, 1]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { sum_to(a, {4}); }), "sum_to"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { clip(a, 1, 0); }), "min_value 1"));
}

TEST_CASE("bad axes name the axis and the rank") {
  Tensor x = Tensor::zeros({2, 3});
  std::string message = error_message<InvalidArgumentError>([&] { sum(x, {2}); });
  CHECK(contains(message, "sum: axis 2"));
  CHECK(contains(message, "rank 2"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { mean(x, {-3}); }), "axis -3"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { max(x, {0, -2}); }), "listed twice"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { argmax(x, 5); }), "argmax: axis 5"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   argmax(Tensor::zeros({3, 0}), 1);
                 }),
                 "empty"));
}

TEST_CASE("unary ops match hand-computed values") {
  Tensor x = Tensor::from_vector<double>({-2, -0.5, 0, 0.5, 2});
  CHECK(values(relu(x)) == std::vector<double>{0, 0, 0, 0.5, 2});
  CHECK(values(abs(x)) == std::vector<double>{2, 0.5, 0, 0.5, 2});
  CHECK(values(clip(x, -1, 1)) == std::vector<double>{-1, -0.5, 0, 0.5, 1});
  CHECK(values(square(x)) == std::vector<double>{4, 0.25, 0, 0.25, 4});
  CHECK(values(neg(x)) == std::vector<double>{2, 0.5, 0, -0.5, -2});
  CHECK(sigmoid(x).at({2}) == 0.5);
  CHECK(sigmoid(Tensor::from_vector<float>({-200, 200})).to_vector<float>() ==
        std::vector<float>{0, 1});  // no overflow to NaN at either end
  CHECK(tanh(x).at({4}) == doctest::Approx(0.9640275800758169));
  CHECK(exp(x).at({0}) == doctest::Approx(0.1353352832366127));
  CHECK(log(Tensor::from_vector<double>({1, std::exp(2.0)})).at({1}) == doctest::Approx(2.0));
  CHECK(sqrt(Tensor::from_vector<double>({9, 0.25})).to_vector<double>() ==
        std::vector<double>{3, 0.5});
}

TEST_CASE("unary gradients at the kinks are the TensorFlow subgradients") {
  Tensor x = Tensor::from_vector<double>({-1, 0, 1, 2}).set_requires_grad(true);
  auto g = gradients(sum(add(add(relu(x), abs(x)), clip(x, 0, 1))), {x});
  // relu' = [0, 0, 1, 1]; abs' = [-1, 0, 1, 1]; clip' (passes on [0, 1]) = [0, 1, 1, 0]
  CHECK(values(g[0]) == std::vector<double>{-1, 1, 3, 2});
  Tensor a = Tensor::from_vector<double>({1, 2}).set_requires_grad(true);
  Tensor b = Tensor::from_vector<double>({1, 3}).set_requires_grad(true);
  auto tie = gradients(sum(maximum(a, b)), {a, b});  // a tie sends the gradient to a
  CHECK(values(tie[0]) == std::vector<double>{1, 0});
  CHECK(values(tie[1]) == std::vector<double>{0, 1});
}

TEST_CASE("gradients of broadcast operands are summed back to their shapes") {
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad(true);
  Tensor b = Tensor::from_vector<double>({1, 10, 100}).set_requires_grad(true);
  Tensor c = Tensor::from_vector<double>({2, 3}, {2, 1}).set_requires_grad(true);
  auto g = gradients(sum(mul(add(a, b), c)), {a, b, c});
  CHECK(values(g[0]) == std::vector<double>{2, 2, 2, 3, 3, 3});
  CHECK(values(g[1]) == std::vector<double>{5, 5, 5});
  CHECK(g[2].shape() == Shape{2, 1});
  CHECK(values(g[2]) == std::vector<double>{1 + 10 + 100 + 6, 4 + 5 + 6 + 111});
  Tensor s = Tensor::scalar(2, DType::kF64).set_requires_grad(true);
  CHECK(gradients(sum(div(a, s)), {s})[0].item() == doctest::Approx(-21.0 / 4));
}

TEST_CASE("reductions over axes, keepdims and empty axes") {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  CHECK(sum(x).item() == 78);
  CHECK(values(sum(x, {0})) == std::vector<double>{8, 10, 12, 14, 16, 18});
  CHECK(values(sum(x, {1})) == std::vector<double>{9, 12, 27, 30});
  CHECK(values(sum(x, {0, 2})) == std::vector<double>{18, 26, 34});
  CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(sum(x, {}, true).shape() == Shape{1, 1, 1});
  CHECK(values(mean(x, {-1})) == std::vector<double>{1.5, 3.5, 5.5, 7.5, 9.5, 11.5});
  CHECK(values(max(x, {1})) == std::vector<double>{5, 6, 11, 12});
  CHECK(argmax(x, 1).dtype() == DType::kI64);
  CHECK(argmax(x, 1).shape() == Shape{2, 2});
  CHECK(values(argmax(x, 1)) == std::vector<double>{2, 2, 2, 2});
  CHECK(values(argmax(Tensor::from_vector<float>({3, 7, 7, 1}), 0)) == std::vector<double>{1});
  // Empty reductions: sum 0, max -inf (as TensorFlow); a [3, 0] tensor sums to [3] zeros.
  CHECK(sum(Tensor::zeros({3, 0}), {1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(std::isinf(max(Tensor::zeros({0})).item()));
  CHECK(sum(Tensor::zeros({0, 4}), {1}).shape() == Shape{0});
  // Reducing size-1 axes only copies.
  CHECK(values(sum(Tensor::from_vector<double>({4, 5}, {1, 2}), {0})) == std::vector<double>{4, 5});
}

TEST_CASE("max propagates NaN on every loop shape") {
  const double nan = std::nan("");
  CHECK(std::isnan(max(Tensor::from_vector<double>({1, nan, 3})).item()));
  const float nan_f = std::nanf("");
  // Twelve values: eight in the unrolled lanes, the NaN in the tail loop; then in a lane.
  CHECK(std::isnan(
      max(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, nan_f, -1, 0})).item()));
  CHECK(std::isnan(max(Tensor::from_vector<float>({1, nan_f, 3, 4, 5, 6, 7, 8, 9})).item()));
  auto columns =
      max(Tensor::from_vector<double>({1, nan, 5, 2, 3, 4}, {2, 3}), {0}).to_vector<double>();
  CHECK(columns[0] == 2);
  CHECK(std::isnan(columns[1]));
  CHECK(columns[2] == 5);
  Tensor long_row = Tensor::zeros({100000}, DType::kF32);
  long_row.data<float>()[70000] = static_cast<float>(nan);
  CHECK(std::isnan(max(long_row).item()));
  long_row.data<float>()[70000] = 4;
  CHECK(max(long_row).item() == 4);
}

TEST_CASE("max shares its gradient equally among ties") {
  Tensor x = Tensor::from_vector<double>({3, 1, 3, 2, 5, 4}, {2, 3}).set_requires_grad(true);
  auto g = gradients(sum(max(x, {1})), {x});
  CHECK(values(g[0]) == std::vector<double>{0.5, 0, 0.5, 0, 1, 0});
  Tensor m = Tensor::from_vector<double>({1, 2, 3}).set_requires_grad(true);
  CHECK(values(gradients(mean(m), {m})[0]) == std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("large tensors on the threaded paths match plain loops") {
  const int64_t rows = 700, cols = 301;
  Generator generator(5);
  Tensor x = random_uniform({rows, cols}, -1, 1, generator, DType::kF64);
  Tensor bias = random_uniform({cols}, -1, 1, generator, DType::kF64);
  const double* xv = x.data<double>();
  const double* bv = bias.data<double>();
  std::vector<double> column_sums(cols, 0.0), row_max(rows, -INFINITY);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double v = xv[r * cols + c];
      column_sums[static_cast<size_t>(c)] += v;
      row_max[static_cast<size_t>(r)] = std::max(row_max[static_cast<size_t>(r)], v);
      total += v;
    }
  CHECK(sum(x).item() == doctest::Approx(total).epsilon(1e-12));
  auto sums = values(sum(x, {0}));
  auto maxima = values(max(x, {1}));
  for (int64_t c = 0; c < cols; ++c)
    CHECK(sums[static_cast<size_t>(c)] == doctest::Approx(column_sums[static_cast<size_t>(c)]));
  CHECK(maxima == row_max);
  Tensor shifted = add(x, bias);
  const double* sv = shifted.data<double>();
  int mismatches = 0;
  for (int64_t i = 0; i < rows * cols; ++i) mismatches += sv[i] != xv[i] + bv[i % cols];
  CHECK(mismatches == 0);
  CHECK(sum(Tensor::ones({300001})).item() == 300001);
}

TEST_CASE("record() captures no handle on the op's own output") {
  // A gradient function that captured its output would keep its node alive forever.
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, 3.5f}, {2, 2}).set_requires_grad(true);
  std::vector<std::function<Tensor(const Tensor&)>> ops_list = {
      [](const Tensor& t) { return exp(t); },         [](const Tensor& t) { return sigmoid(t); },
      [](const Tensor& t) { return tanh(t); },        [](const Tensor& t) { return sqrt(t); },
      [](const Tensor& t) { return max(t, {1}); },    [](const Tensor& t) { return softmax(t); },
      [](const Tensor& t) { return log_softmax(t); }, [](const Tensor& t) { return mul(t, t); },
      [](const Tensor& t) { return transpose(t); },   [](const Tensor& t) { return pow(t, 3.0); }};
  for (size_t i = 0; i < ops_list.size(); ++i) {
    std::weak_ptr<GradNode> node;
    {
      Tensor y = ops_list[i](x);
      REQUIRE(y.grad_node());
      node = y.grad_node();
    }
    INFO("op " << i);
    CHECK(node.expired());
  }
}

TEST_CASE("oneDNN eltwise and softmax build primitives once, and the reference stays selectable") {
  if (!backend_available(Backend::kOneDnn))
    return est::testing::skip("this build has no oneDNN (configured with -Donednn=disabled)");
  BackendGuard guard(Backend::kOneDnn);
  Tensor x =
      Tensor::from_vector<float>({-1, 2, -3, 4, 0.5f, -0.25f}, {2, 3}).set_requires_grad(true);
  auto step = [&] {
    Tensor loss = sum(mul(softmax(relu(x)), tanh(x)));
    return gradients(loss, {x})[0];
  };
  Tensor first = step();
  KernelCacheStats before = kernel_cache_stats();
  Tensor second = step();
  KernelCacheStats after = kernel_cache_stats();
  CHECK(after.created == before.created);
  CHECK(after.hits > before.hits);
  CHECK(values(first) == values(second));
  Tensor reference;
  {
    BackendGuard reference_guard(Backend::kReference);
    reference = step();
    CHECK(kernel_cache_stats().created == after.created);
  }
  auto r = values(reference), o = values(second);
  for (size_t i = 0; i < r.size(); ++i) CHECK(o[i] == doctest::Approx(r[i]).epsilon(1e-5));
}

TEST_CASE("add_scaled_in_place is sub(target, mul(x, a)) to a rounding, in place, on every path") {
  // 100000 elements take the threaded path; 7 the inline one.
  for (int64_t n : {7, 100000}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      Generator generator{uint64_t(n)};
      Tensor target = random_normal({n}, 0, 1, generator, dtype);
      Tensor x = random_normal({n}, 0, 1, generator, dtype);
      Tensor expected = sub(target, mul(x, 0.37));
      Tensor alias = target;  // a handle on the same storage sees the update
      add_scaled_in_place(target, x, -0.37);
      // The compiler may fuse the multiply-add (one rounding instead of two).
      double ulp = dtype == DType::kF32 ? 1.2e-7 : 2.3e-16;
      std::vector<double> got = values(alias), want = values(expected);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i)
        REQUIRE(std::abs(got[i] - want[i]) <= 2 * ulp * (std::abs(want[i]) + 1));
    }
  }
  Tensor target = Tensor::zeros({3});
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { add_scaled_in_place(target, Tensor::zeros({4}), 1.0); }),
                 "[3]"));
  Tensor ints = Tensor::zeros({3}, DType::kI32);
  CHECK_THROWS_AS(add_scaled_in_place(ints, Tensor::zeros({3}, DType::kI32), 1.0),
                  InvalidArgumentError);
}
