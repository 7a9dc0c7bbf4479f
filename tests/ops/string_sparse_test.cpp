// String tensors (tf.string) and sparse tensors (tf.SparseTensor) in ops: creation, copies,
// the errors numeric code gets, and the sparse ops checked against the examples in TF's
// docstrings (tensorflow/python/ops/sparse_ops.py: sparse_reshape, sparse_fill_empty_rows,
// sparse_tensor_to_dense).
#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/math.h"
#include "ops/sparse.h"
#include "ops/tensor.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::testing;

namespace {

Tensor strings(const std::vector<std::string>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

Tensor int64s(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

}  // namespace

TEST_CASE("string tensors hold byte strings, copy deeply and print quoted") {
  std::string binary("a\0b", 3);
  Tensor t = strings({"hello", "", binary, std::string(1000, 'x')}, {2, 2});
  CHECK(t.dtype() == DType::kString);
  CHECK(ops::dtype_name(DType::kString) == "string");
  CHECK(t.shape() == Shape{2, 2});
  CHECK(t.data<std::string>()[2] == binary);
  CHECK(t.to_vector<std::string>()[3].size() == 1000);

  Tensor copy = t.clone();
  copy.data<std::string>()[0] = "changed";
  CHECK(t.data<std::string>()[0] == "hello");
  Tensor target = Tensor::empty({2, 2}, DType::kString);
  target.copy_from(t);
  CHECK(target.to_vector<std::string>() == t.to_vector<std::string>());
  CHECK(t.reshape({4}).data<std::string>()[1].empty());
  CHECK(contains(t.str(), "\"hello\""));
  CHECK(contains(t.str(), "dtype=string"));
  CHECK(Tensor::empty({3}, DType::kString).to_vector<std::string>() ==
        std::vector<std::string>(3, ""));
}

TEST_CASE("string tensors refuse raw bytes, numeric ops and devices other than the CPU") {
  Tensor t = strings({"a", "b"}, {2});
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)t.raw_data(); }),
                 "data<std::string>()"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)ops::add(t, t); }),
                 "string tensor"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)t.at({0}); }), "string"));
  CHECK(
      contains(error_message<InvalidArgumentError>([&] { (void)t.to_vector<float>(); }), "string"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { (void)Tensor::empty({2}, DType::kString, ops::Device::cuda(0)); }),
                 "CPU only"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)t.to(ops::Device::cuda(0)); }),
                 "CPU only"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { t.set_requires_grad(true); }),
                 "floating"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)t.data<float>(); }),
                 "accessed as float32"));
}

TEST_CASE("Tensor::sparse checks its parts, and dense access to it is an error") {
  Tensor sp =
      Tensor::sparse(int64s({0, 1, 2, 0}, {2, 2}), Tensor::from_vector<float>({5, 7}), {3, 4});
  CHECK(sp.is_sparse());
  CHECK(sp.shape() == Shape{3, 4});
  CHECK(sp.dtype() == DType::kF32);
  CHECK(sp.device().is_cpu());
  CHECK(sp.values().to_vector<float>() == std::vector<float>{5, 7});
  CHECK_FALSE(Tensor::zeros({2}).is_sparse());
  CHECK(contains(sp.str(), "SparseTensor"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)sp.raw_data(); }),
                 "sparse::to_dense"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)sp.data<float>(); }),
                 "sparse::to_dense"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)sp.reshape({12}); }),
                 "sparse::reshape"));
  CHECK(contains(error_message<InvalidArgumentError>([] { (void)Tensor::zeros({2}).indices(); }),
                 "dense"));
  Tensor clone = sp.clone();
  CHECK(clone.is_sparse());
  CHECK_FALSE(clone.values().shares_storage(sp.values()));

  CHECK(contains(
      error_message<InvalidArgumentError>([] {
        (void)Tensor::sparse(int64s({0, 4}, {1, 2}), Tensor::from_vector<float>({1}), {3, 4});
      }),
      "out of range"));
  CHECK(contains(
      error_message<InvalidArgumentError>([] {
        (void)Tensor::sparse(int64s({0, 1}, {1, 2}), Tensor::from_vector<float>({1, 2}), {3, 4});
      }),
      "values must be [1]"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   (void)Tensor::sparse(Tensor::from_vector<int32_t>({0, 1}, {1, 2}),
                                        Tensor::from_vector<float>({1}), {3, 4});
                 }),
                 "int64"));
}

TEST_CASE("sparse::to_dense and from_dense, numbers and strings") {
  Tensor sp = Tensor::sparse(int64s({0, 0, 1, 2}, {2, 2}), strings({"a", "b"}, {2}), {2, 3});
  Tensor dense = sparse::to_dense(sp, {.default_string = "?"});
  CHECK(dense.to_vector<std::string>() == std::vector<std::string>{"a", "?", "?", "?", "?", "b"});
  Tensor back = sparse::from_dense(sparse::to_dense(sp));
  CHECK(back.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 2});
  CHECK(back.values().to_vector<std::string>() == std::vector<std::string>{"a", "b"});

  Tensor numbers =
      Tensor::sparse(int64s({1, 0}, {2, 1}), Tensor::from_vector<int64_t>({4, 9}), {3});
  CHECK(contains(error_message<InvalidArgumentError>([&] { (void)sparse::to_dense(numbers); }),
                 "row-major order"));
  CHECK(sparse::to_dense(numbers, {.default_value = -1, .validate_indices = false})
            .to_vector<int64_t>() == std::vector<int64_t>{9, 4, -1});
}

TEST_CASE("sparse::reshape follows the tf.sparse.reshape docstring example") {
  // [2, 3, 6] with a..e at these indices, reshaped to [9, -1].
  Tensor sp = Tensor::sparse(int64s({0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 2, 3}, {5, 3}),
                             strings({"a", "b", "c", "d", "e"}, {5}), {2, 3, 6});
  Tensor out = sparse::reshape(sp, {9, -1});
  CHECK(out.shape() == Shape{9, 4});
  CHECK(out.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 1, 2, 4, 2, 8, 1});
  CHECK(out.values().to_vector<std::string>() == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   (void)sparse::reshape(sp, {5, 7});
                 }),
                 "36 elements"));
}

TEST_CASE("sparse::fill_empty_rows follows the tf.sparse.fill_empty_rows docstring example") {
  // [5, 6] with a at [0, 1], b at [0, 3], c at [2, 0], d at [3, 1]: rows 1 and 4 are empty.
  Tensor sp = Tensor::sparse(int64s({0, 1, 0, 3, 2, 0, 3, 1}, {4, 2}),
                             strings({"a", "b", "c", "d"}, {4}), {5, 6});
  auto filled = sparse::fill_empty_rows(sp, {.default_string = "x"});
  CHECK(filled.output.shape() == Shape{5, 6});
  CHECK(filled.output.indices().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 0, 3, 1, 0, 2, 0, 3, 1, 4, 0});
  CHECK(filled.output.values().to_vector<std::string>() ==
        std::vector<std::string>{"a", "b", "x", "c", "d", "x"});
  CHECK(filled.empty_row_indicator.to_vector<int>() == std::vector<int>{0, 1, 0, 0, 1});
  CHECK(filled.reverse_index_map.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3, 4});

  // Rows out of order keep each row's input order.
  Tensor unordered =
      Tensor::sparse(int64s({1, 0, 0, 0}, {2, 2}), Tensor::from_vector<float>({1, 2}), {2, 1});
  auto refilled = sparse::fill_empty_rows(unordered, {.default_value = 5});
  CHECK(refilled.output.values().to_vector<float>() == std::vector<float>{2, 1});
  CHECK(refilled.reverse_index_map.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
}
