// Copies between a contiguous buffer and a strided view of another, for the layout ops that
// materialise what other frameworks keep as views: transpose (permuted strides) and slice
// (an offset window), and the slice gradient (writing a window into a larger buffer).
//
// The view is given as output-ordered dims with one input stride per dim; dims are merged
// where the strides allow (see broadcast.h), so a slice of whole rows is one memcpy per block
// and an identity transpose a single copy. A plain 2-D swap (matrix transpose) is tiled so
// that both sides stay in cache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/cpu/broadcast.h"
#include "ops/cpu/parallel.h"

namespace est::ops::cpu {

// Merges the view's dims; `dims` and `strides` are output-ordered.
inline LoopPlan plan_view(const Shape& dims, const std::vector<int64_t>& strides) {
  LoopPlan plan;
  plan.strides.resize(1);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!plan.dims.empty() && plan.strides[0].back() == strides[d] * dims[d]) {
      plan.dims.back() *= dims[d];
      plan.strides[0].back() = strides[d];
    } else {
      plan.dims.push_back(dims[d]);
      plan.strides[0].push_back(strides[d]);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    plan.strides[0].push_back(1);
  }
  return plan;
}

// kGather: contiguous[i] = view[i] (transpose, slice). kScatter: view[i] = contiguous[i]
// (slice gradient). `view` points at the view's first element.
enum class CopyDirection : uint8_t { kGather, kScatter };

template <CopyDirection kDirection, class U>
void strided_copy(U* view, U* contiguous, const Shape& dims, const std::vector<int64_t>& strides) {
  const int64_t n = num_elements(dims);
  if (n == 0) return;
  const LoopPlan plan = plan_view(dims, strides);
  const int64_t inner = plan.dims.back();
  const int64_t stride = plan.strides[0].back();
  constexpr int64_t kGrain = int64_t{1} << 15;
  constexpr int64_t kTile = 16;
  if constexpr (kDirection == CopyDirection::kGather) {
    if (plan.dims.size() == 2 && plan.strides[0][0] == 1 && stride == plan.dims[0]) {
      // Matrix transpose: out [rows, cols] from in [cols, rows], in tiles.
      const int64_t rows = plan.dims[0], cols = inner;
      parallel_for((rows + kTile - 1) / kTile, std::max<int64_t>(1, kGrain / (kTile * cols)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r0 = begin * kTile; r0 < std::min(rows, end * kTile); r0 += kTile)
                       for (int64_t c0 = 0; c0 < cols; c0 += kTile)
                         for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
                           for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
                             contiguous[r * cols + c] = view[c * rows + r];
                   });
      return;
    }
  }
  parallel_for(n / inner, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
    int64_t offset;
    for (int64_t row = begin; row < end; ++row) {
      row_offsets(plan, row, &offset);
      U* v = view + offset;
      U* c = contiguous + row * inner;
      if (stride == 1) {
        if constexpr (kDirection == CopyDirection::kGather)
          std::memcpy(c, v, static_cast<size_t>(inner) * sizeof(U));
        else
          std::memcpy(v, c, static_cast<size_t>(inner) * sizeof(U));
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          if constexpr (kDirection == CopyDirection::kGather)
            c[i] = v[i * stride];
          else
            v[i * stride] = c[i];
        }
      }
    }
  });
}

// Row-major element strides of a shape.
inline std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace est::ops::cpu
