// Helpers for the feature_column tests: sparse tensors written like TF's SparseTensorValue.
#pragma once

#include <string>
#include <vector>

#include "data/element.h"
#include "ops/tensor.h"
#include "tests/ops/expect_error.h"

namespace est::testing {

// indices as a flat list of (row, column) pairs, as in the TF tests.
inline Tensor sparse_strings(std::vector<int64_t> indices, std::vector<std::string> values,
                             ops::Shape dense_shape) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::sparse(Tensor::from_vector(indices, {n, 2}), data::string_tensor(values),
                        dense_shape);
}

template <class T>
Tensor sparse_numbers(std::vector<int64_t> indices, std::vector<T> values, ops::Shape dense_shape) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::sparse(Tensor::from_vector(indices, {n, 2}), Tensor::from_vector(values),
                        dense_shape);
}

}  // namespace est::testing
