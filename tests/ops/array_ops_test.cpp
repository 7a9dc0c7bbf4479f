// Semantic tests of ops/array_ops.h: layout ops on every dtype, gather (values, repeated-id
// gradients, error messages), one_hot (off rows for out-of-range ids), cast rules, and the
// argument errors of transpose, concat, stack, slice and squeeze. Expected values are written
// out by hand.
#include <doctest/doctest.h>

#include "ops/ops.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

TEST_CASE("layout ops work for every dtype") {
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(transpose(i).shape() == Shape{3, 2});
  CHECK(transpose(i).to_vector<int64_t>() == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
  CHECK(concat({i, i}, 1).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  CHECK(slice(i, {0, 1}, {-1, 2}).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 5, 6});
  Tensor flags = cast(Tensor::from_vector<float>({0, 1, 2, 0}, {2, 2}), DType::kBool);
  CHECK(flags.dtype() == DType::kBool);
  CHECK(transpose(flags).to_vector<int>() == std::vector<int>{0, 1, 1, 0});
  Tensor bytes = Tensor::from_vector<uint8_t>({7, 8, 9});
  CHECK(stack({bytes, bytes}, 1).shape() == Shape{3, 2});
  CHECK(stack({bytes, bytes}, 1).to_vector<int>() == std::vector<int>{7, 7, 8, 8, 9, 9});
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  CHECK(transpose(x, {1, 0, 2}).to_vector<float>() ==
        std::vector<float>{1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12});
  CHECK(transpose(x).shape() == Shape{2, 3, 2});
  CHECK(transpose(x).to_vector<float>() ==
        std::vector<float>{1, 7, 3, 9, 5, 11, 2, 8, 4, 10, 6, 12});
  CHECK(flatten(x).shape() == Shape{2, 6});
  CHECK(expand_dims(x, 0).shape() == Shape{1, 2, 3, 2});
  CHECK(expand_dims(x, -1).shape() == Shape{2, 3, 2, 1});
  CHECK(squeeze(Tensor::zeros({1, 3, 1})).shape() == Shape{3});
  CHECK(squeeze(Tensor::zeros({1, 3, 1}), {-1}).shape() == Shape{1, 3});
  CHECK(reshape(x, {3, -1}).shape() == Shape{3, 4});
}

TEST_CASE("a large transpose (tiled path) matches a plain loop") {
  const int64_t rows = 131, cols = 77;
  std::vector<int32_t> data(static_cast<size_t>(rows * cols));
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<int32_t>(k);
  Tensor t = transpose(Tensor::from_vector(data, {rows, cols}));
  auto out = t.to_vector<int32_t>();
  int mismatches = 0;
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r)
      mismatches +=
          out[static_cast<size_t>(c * rows + r)] != data[static_cast<size_t>(r * cols + c)];
  CHECK(mismatches == 0);
}

TEST_CASE("gather picks rows and scatter-adds repeated ids in its gradient") {
  Tensor params =
      Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2}).set_requires_grad(true);
  Tensor ids = Tensor::from_vector<int32_t>({2, 0, 2, 2}, {2, 2});
  Tensor rows = gather(params, ids);
  CHECK(rows.shape() == Shape{2, 2, 2});
  CHECK(rows.to_vector<double>() == std::vector<double>{20, 21, 0, 1, 20, 21, 20, 21});
  auto g = gradients(sum(rows), {params})[0];
  CHECK(g.to_vector<double>() == std::vector<double>{1, 1, 0, 0, 3, 3});
  Tensor columns = gather(params, Tensor::from_vector<int64_t>({1, 1, 0}), 1);
  CHECK(columns.shape() == Shape{3, 3});
  CHECK(columns.to_vector<double>() == std::vector<double>{1, 1, 0, 11, 11, 10, 21, 21, 20});
  Tensor words = Tensor::from_vector<int64_t>({5, 6, 7});
  CHECK(gather(words, Tensor::from_vector<int64_t>({2, 2})).to_vector<int64_t>() ==
        std::vector<int64_t>{7, 7});
}

TEST_CASE("gather gradient over wide rows (several column blocks) counts repeated ids") {
  Tensor params = Tensor::zeros({3, 600}, DType::kF32).set_requires_grad(true);
  Tensor ids = Tensor::from_vector<int64_t>({0, 2, 0, 0});
  auto g = gradients(sum(gather(params, ids)), {params})[0].to_vector<float>();
  int mismatches = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    float expected = k < 600 ? 3.0f : (k < 1200 ? 0.0f : 1.0f);
    mismatches += g[k] != expected;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("gather errors name the id, its position and the valid range") {
  Tensor params = Tensor::zeros({5, 4});
  std::string message = error_message<InvalidArgumentError>([&] {
    gather(params, Tensor::from_vector<int64_t>({0, 3, 7}));
  });
  CHECK(contains(message, "index 7 at position 2"));
  CHECK(contains(message, "[0, 5)"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { gather(params, Tensor::from_vector<int32_t>({-1})); }),
                 "index -1 at position 0"));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { gather(params, Tensor::from_vector<float>({1})); }),
      "indices must be int32 or int64, got float32"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { gather(params, Tensor::from_vector<int32_t>({0}), 2); }),
                 "gather: axis 2"));
}

TEST_CASE("one_hot: depth, on/off values and out-of-range ids") {
  Tensor ids = Tensor::from_vector<int64_t>({0, 2, -1, 3});
  Tensor h = one_hot(ids, 3);
  CHECK(h.shape() == Shape{4, 3});
  CHECK(h.dtype() == DType::kF32);
  CHECK(h.to_vector<float>() == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  Tensor custom = one_hot(Tensor::from_vector<int32_t>({1, 0}, {1, 2}), 2, 5.0, -1.0, DType::kI32);
  CHECK(custom.shape() == Shape{1, 2, 2});
  CHECK(custom.to_vector<int32_t>() == std::vector<int32_t>{-1, 5, 5, -1});
  CHECK(contains(error_message<InvalidArgumentError>([&] { one_hot(ids, -2); }), "depth"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { one_hot(Tensor::zeros({2}), 3); }),
                 "one_hot: indices must be int32 or int64"));
}

TEST_CASE("cast converts values and passes gradients between floating types only") {
  Tensor x = Tensor::from_vector<float>({-1.75f, 0, 2.5f});
  CHECK(cast(x, DType::kI32).to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 2});
  CHECK(cast(x, DType::kBool).to_vector<int>() == std::vector<int>{1, 0, 1});
  CHECK(cast(x, DType::kF32).shares_storage(x));
  Tensor leaf = Tensor::from_vector<float>({1, 2}).set_requires_grad(true);
  Tensor wide = cast(leaf, DType::kF64);
  CHECK(wide.requires_grad());
  auto g = gradients(sum(mul(wide, wide)), {leaf})[0];
  CHECK(g.dtype() == DType::kF32);
  CHECK(g.to_vector<float>() == std::vector<float>{2, 4});
  CHECK_FALSE(cast(leaf, DType::kI64).requires_grad());
}

TEST_CASE("gradients of transpose, concat and slice are the inverse layouts") {
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad(true);
  Tensor b = Tensor::from_vector<double>({7, 8}, {2, 1}).set_requires_grad(true);
  Tensor weights = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  auto g = gradients(sum(mul(concat({a, b}, 1), weights)), {a, b});
  CHECK(g[0].to_vector<double>() == std::vector<double>{1, 2, 3, 5, 6, 7});
  CHECK(g[1].to_vector<double>() == std::vector<double>{4, 8});
  auto s = gradients(
      sum(mul(slice(a, {1, 1}, {1, 2}), Tensor::from_vector<double>({10, 20}, {1, 2}))), {a});
  CHECK(s[0].to_vector<double>() == std::vector<double>{0, 0, 0, 0, 10, 20});
  auto t = gradients(
      sum(mul(transpose(a), Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}))), {a});
  CHECK(t[0].to_vector<double>() == std::vector<double>{1, 3, 5, 2, 4, 6});
}

TEST_CASE("layout ops reject bad arguments with messages naming them") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK(contains(error_message<InvalidArgumentError>([&] { transpose(x, {0}); }),
                 "perm [0] has 1 entries for a tensor of rank 2"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   transpose(x, {1, 1});
                 }),
                 "lists axis 1 twice"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   concat({x, Tensor::zeros({3, 3})}, 1);
                 }),
                 "tensor 1 has shape [3, 3] and tensor 0 has [2, 3]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   concat({x, Tensor::zeros({2, 3}, DType::kF64)}, 0);
                 }),
                 "float64"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { concat({}, 0); }),
                 "concat: got no tensors"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { concat({x}, 2); }), "concat: axis 2"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   stack({x, Tensor::zeros({3, 2})});
                 }),
                 "stack: tensor 1 has shape [3, 2]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { stack({x}, 3); }), "stack: axis 3"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   slice(x, {0, 2}, {1, 2});
                 }),
                 "axis 1 has size 3; begin 2 with size 2"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { slice(x, {0}, {1}); }),
                 "tensor of rank 2"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { squeeze(x, {1}); }),
                 "axis 1 of shape [2, 3] has size 3"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { expand_dims(x, 3); }), "axis 3"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { flatten(Tensor::scalar(1)); }),
                 "flatten"));
}
