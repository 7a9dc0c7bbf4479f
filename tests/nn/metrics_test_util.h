// Helpers shared by the metrics tests: small tensors from literals and a slice of rows.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/tensor.h"

namespace est::testing {

inline Tensor f32(const std::vector<float>& values, const Shape& shape) {
  return Tensor::from_vector<float>(values, shape);
}
inline Tensor f32(const std::vector<float>& values) { return Tensor::from_vector<float>(values); }
inline Tensor i64(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector<int64_t>(values, shape);
}
inline Tensor i64(const std::vector<int64_t>& values) {
  return Tensor::from_vector<int64_t>(values);
}

// Rows [begin, end) of a tensor's leading dimension, same dtype.
inline Tensor rows(const Tensor& tensor, int64_t begin, int64_t end) {
  Shape shape = tensor.shape();
  int64_t row_size = tensor.numel() / shape[0];
  shape[0] = end - begin;
  return ops::dispatch_dtype(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> all = tensor.to_vector<T>();
    std::vector<T> part(all.begin() + begin * row_size, all.begin() + end * row_size);
    return Tensor::from_vector<T>(part, shape);
  });
}

}  // namespace est::testing
