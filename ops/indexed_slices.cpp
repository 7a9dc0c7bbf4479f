// IndexedSlices: checks, densifying (through gather's gradient kernel, so that a densified
// gradient equals the dense one bit for bit), and the host-side row work of sparse updates.
#include "ops/indexed_slices.h"

#include <cstring>
#include <unordered_map>

#include "ops/array_ops.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

Shape row_shape(int64_t rows, const Shape& dense_shape) {
  Shape shape = dense_shape;
  shape[0] = rows;
  return shape;
}

}  // namespace

int64_t IndexedSlices::row_elements() const {
  int64_t elements = 1;
  for (size_t d = 1; d < dense_shape.size(); ++d) elements *= dense_shape[d];
  return elements;
}

size_t IndexedSlices::nbytes() const {
  if (!defined()) return 0;
  return static_cast<size_t>(num_rows()) * sizeof(int64_t) + values.nbytes();
}

IndexedSlices make_indexed_slices(Tensor indices, Tensor values, Shape dense_shape) {
  if (!indices.defined() || !values.defined())
    throw InvalidArgumentError("IndexedSlices: indices and values must be defined tensors");
  if (dense_shape.empty())
    throw InvalidArgumentError(
        "IndexedSlices: the dense shape is a scalar; slices need a first axis of rows");
  if (indices.dtype() != DType::kI64 || indices.rank() != 1)
    throw InvalidArgumentError(fmt::format("IndexedSlices: indices must be int64 [n], got {} {}",
                                           dtype_name(indices.dtype()),
                                           shape_str(indices.shape())));
  if (values.shape() != row_shape(indices.numel(), dense_shape))
    throw InvalidArgumentError(
        fmt::format("IndexedSlices: values must be {} for {} indices into dense shape {}, got {}",
                    shape_str(row_shape(indices.numel(), dense_shape)), indices.numel(),
                    shape_str(dense_shape), shape_str(values.shape())));
  if (indices.device() != values.device())
    throw InvalidArgumentError("IndexedSlices: indices on " + indices.device().str() +
                               " but values on " + values.device().str());
  const std::vector<int64_t> rows = indices.to_vector<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= dense_shape[0])
      throw InvalidArgumentError(
          fmt::format("IndexedSlices: index {} at position {} is outside [0, {}) of dense shape {}",
                      rows[i], i, dense_shape[0], shape_str(dense_shape)));
  return {std::move(indices), std::move(values), std::move(dense_shape)};
}

Tensor to_dense(const IndexedSlices& slices) {
  if (!slices.defined()) throw InvalidArgumentError("to_dense: the IndexedSlices are undefined");
  const Device device = slices.values.device();
  Tensor dense = Tensor::empty(slices.dense_shape, slices.values.dtype(), device);
  run_kernel<OpId::kGatherGradient>("IndexedSlices to_dense", device, slices.values.dtype(),
                                    slices.values, slices.indices, 0, dense);
  return dense;
}

IndexedSlices sum_duplicates(const IndexedSlices& slices) {
  if (!slices.defined())
    throw InvalidArgumentError("sum_duplicates: the IndexedSlices are undefined");
  if (!slices.values.device().is_cpu())
    throw InvalidArgumentError("sum_duplicates: slices on " + slices.values.device().str() +
                               " are summed by densifying them (to_dense)");
  const std::vector<int64_t> rows = slices.indices.to_vector<int64_t>();
  std::unordered_map<int64_t, int64_t> position;  // row -> its place in the output
  std::vector<int64_t> unique;
  std::vector<int64_t> slot(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [it, fresh] = position.try_emplace(rows[i], static_cast<int64_t>(unique.size()));
    if (fresh) unique.push_back(rows[i]);
    slot[i] = it->second;
  }
  if (unique.size() == rows.size()) return slices;
  const int64_t width = slices.row_elements();
  Tensor values = Tensor::empty(row_shape(static_cast<int64_t>(unique.size()), slices.dense_shape),
                                slices.values.dtype());
  dispatch_float(values.dtype(), "sum_duplicates", [&](auto tag) {
    using T = decltype(tag);
    const T* in = slices.values.data<T>();
    T* out = values.data<T>();
    std::vector<bool> seen(unique.size(), false);
    for (size_t i = 0; i < rows.size(); ++i) {
      T* to = out + slot[i] * width;
      const T* from = in + static_cast<int64_t>(i) * width;
      if (!seen[static_cast<size_t>(slot[i])]) {
        std::memcpy(to, from, static_cast<size_t>(width) * sizeof(T));
        seen[static_cast<size_t>(slot[i])] = true;
      } else {
        for (int64_t c = 0; c < width; ++c) to[c] = static_cast<T>(to[c] + from[c]);
      }
    }
  });
  return {Tensor::from_vector(unique), std::move(values), slices.dense_shape};
}

IndexedSlices concat_slices(const std::vector<IndexedSlices>& parts) {
  if (parts.empty()) throw InvalidArgumentError("concat_slices: got no slices");
  std::vector<Tensor> indices, values;
  for (const IndexedSlices& part : parts) {
    if (part.dense_shape != parts.front().dense_shape ||
        part.values.dtype() != parts.front().values.dtype())
      throw InvalidArgumentError(fmt::format(
          "concat_slices: slices of {} {} and of {} {} do not add up",
          dtype_name(part.values.dtype()), shape_str(part.dense_shape),
          dtype_name(parts.front().values.dtype()), shape_str(parts.front().dense_shape)));
    indices.push_back(part.indices);
    values.push_back(part.values);
  }
  if (parts.size() == 1) return parts.front();
  return {concat(indices, 0), concat(values, 0), parts.front().dense_shape};
}

IndexedSlices scale_slices(const IndexedSlices& slices, double factor) {
  return {slices.indices, mul(slices.values, factor), slices.dense_shape};
}

void scatter_rows(Tensor& target, const Tensor& indices, const Tensor& rows) {
  if (!target.device().is_cpu() || !rows.device().is_cpu())
    throw InvalidArgumentError("scatter_rows: target and rows must be CPU tensors");
  if (target.rank() == 0 || rows.dtype() != target.dtype() ||
      rows.shape() != row_shape(indices.numel(), target.shape()))
    throw InvalidArgumentError(fmt::format("scatter_rows: {} rows {} do not fit {} target {}",
                                           dtype_name(rows.dtype()), shape_str(rows.shape()),
                                           dtype_name(target.dtype()), shape_str(target.shape())));
  const std::vector<int64_t> at = indices.to_vector<int64_t>();
  const size_t row_bytes = rows.numel() == 0 ? 0 : rows.nbytes() / at.size();
  auto* to = static_cast<char*>(target.raw_data());
  const auto* from = static_cast<const char*>(rows.raw_data());
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i] < 0 || at[i] >= target.dim(0))
      throw InvalidArgumentError(
          fmt::format("scatter_rows: row {} is outside [0, {})", at[i], target.dim(0)));
    std::memcpy(to + static_cast<size_t>(at[i]) * row_bytes, from + i * row_bytes, row_bytes);
  }
}

}  // namespace est::ops
