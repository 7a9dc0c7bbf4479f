// Reference kernels of the layout and indexing ops: transpose, concat, slice and its gradient,
// gather and its gradient, one_hot.
//
// Layout kernels move elements without looking at them, so they serve every dtype (elements
// are copied as unsigned integers of the dtype's size). gather checks every index before
// copying anything, so a bad id is reported by value and position instead of reading out of
// bounds; its gradient scatter-adds rows into zeros, each task owning a block of columns so that
// repeated ids accumulate without races.
#include <cstring>

#include "ops/axis_layout.h"
#include "ops/cpu/checks.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/strided_copy.h"

namespace est::ops::cpu {
namespace {

int64_t window_offset(const Shape& shape, const std::vector<int64_t>& begin) {
  const std::vector<int64_t> strides = contiguous_strides(shape);
  int64_t offset = 0;
  for (size_t d = 0; d < begin.size(); ++d) offset += begin[d] * strides[d];
  return offset;
}

// Indices as int64, each checked against [0, limit).
std::vector<int64_t> checked_indices(const Tensor& indices, int64_t limit, int axis,
                                     const Shape& params_shape) {
  std::vector<int64_t> ids = indices.to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= limit)
      throw InvalidArgumentError(fmt::format(
          "gather: index {} at position {} of the indices is outside [0, {}) for axis {} of "
          "params of shape {}; check the ids (vocabulary size, label range)",
          ids[i], i, limit, axis, shape_str(params_shape)));
  return ids;
}

}  // namespace

void transpose(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) strides[d] = in_strides[static_cast<size_t>(perm[d])];
  dispatch_bytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    strided_copy<CopyDirection::kGather>(const_cast<U*>(static_cast<const U*>(x.raw_data())),
                                         static_cast<U*>(out.raw_data()), out.shape(), strides);
  });
}

void concat(const std::vector<Tensor>& inputs, int axis, Tensor& out) {
  const Shape& out_shape = out.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < out_shape.size(); ++d) inner *= out_shape[d];
  const int64_t out_row = out_shape[static_cast<size_t>(axis)] * inner;
  const size_t element = dtype_size(out.dtype());
  auto* dst = static_cast<char*>(out.raw_data());
  parallel_for(outer, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(out_row, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t o = begin; o < end; ++o) {
                   int64_t column = 0;
                   for (const Tensor& t : inputs) {
                     const int64_t chunk = t.shape()[static_cast<size_t>(axis)] * inner;
                     std::memcpy(dst + static_cast<size_t>(o * out_row + column) * element,
                                 static_cast<const char*>(t.raw_data()) +
                                     static_cast<size_t>(o * chunk) * element,
                                 static_cast<size_t>(chunk) * element);
                     column += chunk;
                   }
                 }
               });
}

void slice(const Tensor& x, const std::vector<int64_t>& begin, Tensor& out) {
  const int64_t offset = window_offset(x.shape(), begin);
  const std::vector<int64_t> strides = contiguous_strides(x.shape());
  dispatch_bytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    U* base = const_cast<U*>(static_cast<const U*>(x.raw_data())) + offset;
    strided_copy<CopyDirection::kGather>(base, static_cast<U*>(out.raw_data()), out.shape(),
                                         strides);
  });
}

void slice_gradient(const Tensor& grad, const std::vector<int64_t>& begin, Tensor& dx) {
  fill(dx, 0.0);
  const int64_t offset = window_offset(dx.shape(), begin);
  const std::vector<int64_t> strides = contiguous_strides(dx.shape());
  dispatch_bytes(grad.dtype(), [&](auto tag) {
    using U = decltype(tag);
    // The scatter reads grad; nothing is written there.
    strided_copy<CopyDirection::kScatter>(static_cast<U*>(dx.raw_data()) + offset,
                                          const_cast<U*>(static_cast<const U*>(grad.raw_data())),
                                          grad.shape(), strides);
  });
}

void gather(const Tensor& params, const Tensor& indices, int axis, Tensor& out) {
  const AxisLayout layout = axis_layout(params.shape(), axis);
  const std::vector<int64_t> ids = checked_indices(indices, layout.size, axis, params.shape());
  const size_t row_bytes = static_cast<size_t>(layout.inner) * dtype_size(params.dtype());
  const int64_t count = static_cast<int64_t>(ids.size());
  const auto* src = static_cast<const char*>(params.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  parallel_for(
      layout.outer * count,
      std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(layout.inner, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
          const int64_t o = task / count, i = task % count;
          std::memcpy(
              dst + static_cast<size_t>(task) * row_bytes,
              src + static_cast<size_t>(o * layout.size + ids[static_cast<size_t>(i)]) * row_bytes,
              row_bytes);
        }
      });
}

void gather_gradient(const Tensor& grad, const Tensor& indices, int axis, Tensor& dparams) {
  fill(dparams, 0.0);
  const AxisLayout layout = axis_layout(dparams.shape(), axis);
  const std::vector<int64_t> ids = indices.to_vector<int64_t>();  // checked by forward
  const int64_t count = static_cast<int64_t>(ids.size());
  dispatch_float(grad.dtype(), "gather gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad.data<T>();
    T* d = dparams.data<T>();
    // Each task owns one outer index and one block of columns, so repeated ids never race and
    // an embedding gradient (outer == 1) still splits.
    constexpr int64_t kColumns = 256;
    const int64_t blocks = (layout.inner + kColumns - 1) / kColumns;
    parallel_for(layout.outer * blocks,
                 std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(count * kColumns, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t task = begin; task < end; ++task) {
                     const int64_t o = task / blocks;
                     const int64_t c0 = (task % blocks) * kColumns;
                     const int64_t c1 = std::min(layout.inner, c0 + kColumns);
                     for (int64_t i = 0; i < count; ++i) {
                       const T* from = g + (o * count + i) * layout.inner;
                       T* to = d + (o * layout.size + ids[static_cast<size_t>(i)]) * layout.inner;
                       for (int64_t c = c0; c < c1; ++c) to[c] += from[c];
                     }
                   }
                 });
  });
}

// Ids outside [0, depth) (-1 included) give a row of off_value, as tf.one_hot.
void one_hot(const Tensor& indices, double on_value, double off_value, Tensor& out) {
  fill(out, off_value);
  const int64_t depth = out.shape().back();
  const std::vector<int64_t> ids = indices.to_vector<int64_t>();
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* data = out.data<T>();
    const T on = static_cast<T>(on_value);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= 0 && ids[i] < depth) data[static_cast<int64_t>(i) * depth + ids[i]] = on;
  });
}

}  // namespace est::ops::cpu
