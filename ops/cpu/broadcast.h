// NumPy broadcasting as loop plans for the CPU kernels.
//
// A binary op over broadcast operands is described by the output dims and, per operand, a
// stride per output dim (0 where the operand is broadcast). Adjacent dims that both operands
// walk the same way are merged, so [N, C] + [C] becomes two loops (rows, then a contiguous
// row) and same-shape operands one flat loop; the kernels then only special-case the innermost
// stride (0 or 1) and stay auto-vectorisable.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::ops::cpu {

// The broadcast of two shapes, or an InvalidArgumentError naming `op` and both shapes.
inline Shape broadcast_shape(std::string_view op, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw InvalidArgumentError(fmt::format(
          "{}: shapes {} and {} are not broadcast-compatible (dimension {} of the result: {} vs "
          "{}); reshape or expand_dims one operand so that each pair of trailing dimensions is "
          "equal or 1",
          op, shape_str(a), shape_str(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Element strides of `shape` viewed as broadcast to `out` (right-aligned; 0 on broadcast dims).
inline std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  size_t offset = out.size() - shape.size();
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1) strides[i + offset] = stride;
    stride *= shape[i];
  }
  return strides;
}

// A loop nest over the output with one stride per operand per loop; dims are outermost first.
struct LoopPlan {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]
};

// Builds the plan for operands of `shapes` broadcast to `out`, dropping size-1 dims and
// merging dim i into i+1 when every operand's stride satisfies stride[i] == stride[i+1] *
// dims[i+1] (contiguous together, or broadcast along both).
inline LoopPlan plan_loops(const std::vector<Shape>& shapes, const Shape& out) {
  LoopPlan plan;
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : shapes) strides.push_back(broadcast_strides(s, out));
  plan.strides.resize(shapes.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !plan.dims.empty();
    for (size_t k = 0; k < shapes.size() && merge; ++k)
      merge = plan.strides[k].back() == strides[k][d] * out[d];
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < shapes.size(); ++k) plan.strides[k].back() = strides[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < shapes.size(); ++k) plan.strides[k].push_back(strides[k][d]);
    }
  }
  if (plan.dims.empty()) {  // a scalar or all-ones output: one loop of one element
    plan.dims.push_back(1);
    for (auto& s : plan.strides) s.push_back(0);
  }
  return plan;
}

// Offsets of each operand at the start of outer row `row` (all loops but the innermost).
inline void row_offsets(const LoopPlan& plan, int64_t row, int64_t* offsets) {
  size_t operands = plan.strides.size();
  for (size_t k = 0; k < operands; ++k) offsets[k] = 0;
  for (size_t d = plan.dims.size() - 1; d-- > 0;) {
    int64_t index = row % plan.dims[d];
    row /= plan.dims[d];
    for (size_t k = 0; k < operands; ++k) offsets[k] += index * plan.strides[k][d];
  }
}

}  // namespace est::ops::cpu
