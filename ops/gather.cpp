// Indexing and type ops: gather (embedding lookup), one_hot and cast.
//
// gather validates every index before copying anything, so a bad id is reported by value and
// position instead of reading out of bounds; its gradient scatter-adds rows back into a zero
// tensor of the params' shape, each task owning a block of columns so that repeated ids
// accumulate without races. cast converts through C++ conversions and passes gradients between
// floating types.
#include <cstring>

#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/cpu/parallel.h"

namespace est::ops {
namespace {

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

// params viewed as [outer, rows, inner].
struct GatherLayout {
  int64_t outer = 1, rows = 1, inner = 1;
};

GatherLayout layout_of(const Shape& shape, int axis) {
  GatherLayout layout;
  for (int d = 0; d < axis; ++d) layout.outer *= shape[static_cast<size_t>(d)];
  layout.rows = shape[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) layout.inner *= shape[d];
  return layout;
}

}  // namespace

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  cpu::require_cpu("gather", params);
  cpu::require_cpu("gather", indices);
  cpu::require_index_dtype("gather", "indices", indices);
  if (params.rank() == 0)
    throw InvalidArgumentError("gather: params is a scalar; it needs at least one axis to index");
  const int a = cpu::normalize_axis("gather", axis, params.rank());
  const Shape& shape = params.shape();
  const GatherLayout layout = layout_of(shape, a);
  std::vector<int64_t> ids = checked_indices(indices, layout.rows, a, shape);
  Shape out_shape(shape.begin(), shape.begin() + a);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), shape.begin() + a + 1, shape.end());
  Tensor out = Tensor::empty(out_shape, params.dtype());
  const size_t element = dtype_size(params.dtype());
  const size_t row_bytes = static_cast<size_t>(layout.inner) * element;
  const int64_t count = static_cast<int64_t>(ids.size());
  const auto* src = static_cast<const char*>(params.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  cpu::parallel_for(
      layout.outer * count,
      std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(layout.inner, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
          int64_t o = task / count, i = task % count;
          std::memcpy(
              dst + static_cast<size_t>(task) * row_bytes,
              src + static_cast<size_t>(o * layout.rows + ids[static_cast<size_t>(i)]) * row_bytes,
              row_bytes);
        }
      });
  if (!needs_recording({&params})) return out;
  return record(
      out, "gather", {params, indices},
      [ids = std::move(ids), layout, shape](const Tensor& grad,
                                            const NeedsGrad& needs) -> std::vector<Tensor> {
        if (!needs[0]) return {Tensor(), Tensor()};
        Tensor dparams = Tensor::zeros(shape, grad.dtype());
        const int64_t count = static_cast<int64_t>(ids.size());
        dispatch_float(grad.dtype(), "gather gradient", [&](auto tag) {
          using T = decltype(tag);
          const T* g = grad.data<T>();
          T* d = dparams.data<T>();
          // Each task owns one outer index and one block of columns, so repeated
          // ids never race and an embedding gradient (outer == 1) still splits.
          constexpr int64_t kColumns = 256;
          const int64_t blocks = (layout.inner + kColumns - 1) / kColumns;
          cpu::parallel_for(
              layout.outer * blocks,
              std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(count * kColumns, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t task = begin; task < end; ++task) {
                  const int64_t o = task / blocks;
                  const int64_t c0 = (task % blocks) * kColumns;
                  const int64_t c1 = std::min(layout.inner, c0 + kColumns);
                  for (int64_t i = 0; i < count; ++i) {
                    const T* from = g + (o * count + i) * layout.inner;
                    T* to = d + (o * layout.rows + ids[static_cast<size_t>(i)]) * layout.inner;
                    for (int64_t c = c0; c < c1; ++c) to[c] += from[c];
                  }
                }
              });
        });
        return {dparams, Tensor()};
      });
}

Tensor cast(const Tensor& x, DType dtype) {
  cpu::require_cpu("cast", x);
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype);
  dispatch_dtype(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_dtype(dtype, [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* in = x.data<From>();
      To* result = out.data<To>();
      cpu::parallel_for(x.numel(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          if constexpr (std::is_same_v<To, bool>)
            result[i] = in[i] != From(0);
          else
            result[i] = static_cast<To>(in[i]);
        }
      });
    });
  });
  if (!is_floating(x.dtype()) || !is_floating(dtype)) return out;
  return record(out, "cast", {x},
                [from = x.dtype()](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {cast(grad, from)};
                });
}

// Ids outside [0, depth) (-1 included) give a row of off_value, as tf.one_hot.
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DType dtype) {
  cpu::require_cpu("one_hot", indices);
  cpu::require_index_dtype("one_hot", "indices", indices);
  if (depth < 0)
    throw InvalidArgumentError(fmt::format("one_hot: depth must be >= 0, got {}", depth));
  Shape out_shape = indices.shape();
  out_shape.push_back(depth);
  Tensor out = Tensor::full(out_shape, off_value, dtype);
  std::vector<int64_t> ids = indices.to_vector<int64_t>();
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = out.data<T>();
    const T on = static_cast<T>(on_value);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= 0 && ids[i] < depth) data[static_cast<int64_t>(i) * depth + ids[i]] = on;
  });
  return out;
}

}  // namespace est::ops
