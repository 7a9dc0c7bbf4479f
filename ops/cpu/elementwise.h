// Elementwise CPU kernels: unary maps and broadcasting binary maps over raw buffers.
//
// The binary map has explicit fast paths for same-shape and scalar operands (one flat loop);
// everything else, row broadcasting like [N, C] + [C] included, goes through a merged loop plan
// (broadcast.h) whose innermost loop is contiguous or broadcast for each operand. Loops are
// plain indexed loops over `op` so that the compiler vectorises them; large tensors are split
// over the intra-op threads with parallel_for.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/cpu/broadcast.h"
#include "ops/cpu/parallel.h"

namespace est::ops::cpu {

template <class T, class Out, class Op>
void unary_map(const T* in, Out* out, int64_t n, Op op) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(in[i]);
  });
}

// out[i] = op(a[i], b[i]) over three buffers of one shape.
template <class A, class B, class Out, class Op>
void zip_map(const A* a, const B* b, Out* out, int64_t n, Op op) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], b[i]);
  });
}

// out = op(a, b) with a of `a_shape` and b of `b_shape` broadcast to `out_shape`.
template <class T, class Out, class Op>
void binary_map(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, Out* out,
                const Shape& out_shape, Op op) {
  const int64_t n = num_elements(out_shape);
  if (n == 0) return;
  const int64_t na = num_elements(a_shape), nb = num_elements(b_shape);
  if (na == n && nb == n) {  // same shape (up to size-1 dims)
    zip_map(a, b, out, n, op);
    return;
  }
  if (na == n && nb == 1) {  // tensor op scalar
    const T s = b[0];
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], s);
    });
    return;
  }
  if (na == 1 && nb == n) {  // scalar op tensor
    const T s = a[0];
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = op(s, b[i]);
    });
    return;
  }
  // General broadcasting, row broadcasting included: rows of the innermost merged loop.
  const LoopPlan plan = plan_loops({a_shape, b_shape}, out_shape);
  const int64_t inner = plan.dims.back();
  const int64_t sa = plan.strides[0].back(), sb = plan.strides[1].back();
  const int64_t rows = n / inner;
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / inner),
               [&](int64_t begin, int64_t end) {
                 int64_t offsets[2];
                 for (int64_t row = begin; row < end; ++row) {
                   row_offsets(plan, row, offsets);
                   const T* pa = a + offsets[0];
                   const T* pb = b + offsets[1];
                   Out* po = out + row * inner;
                   if (sa == 1 && sb == 1) {
                     for (int64_t i = 0; i < inner; ++i) po[i] = op(pa[i], pb[i]);
                   } else if (sa == 1 && sb == 0) {
                     const T s = pb[0];
                     for (int64_t i = 0; i < inner; ++i) po[i] = op(pa[i], s);
                   } else if (sa == 0 && sb == 1) {
                     const T s = pa[0];
                     for (int64_t i = 0; i < inner; ++i) po[i] = op(s, pb[i]);
                   } else {
                     for (int64_t i = 0; i < inner; ++i) po[i] = op(pa[i * sa], pb[i * sb]);
                   }
                 }
               });
}

// out = op(x, y, z), each operand broadcast to `out_shape` (used by gradients such as
// maximum's, which select the upstream gradient by comparing the two inputs).
template <class T, class Out, class Op>
void ternary_map(const T* x, const Shape& x_shape, const T* y, const Shape& y_shape, const T* z,
                 const Shape& z_shape, Out* out, const Shape& out_shape, Op op) {
  const int64_t n = num_elements(out_shape);
  if (n == 0) return;
  if (num_elements(x_shape) == n && num_elements(y_shape) == n && num_elements(z_shape) == n) {
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = op(x[i], y[i], z[i]);
    });
    return;
  }
  const LoopPlan plan = plan_loops({x_shape, y_shape, z_shape}, out_shape);
  const int64_t inner = plan.dims.back();
  const int64_t sx = plan.strides[0].back(), sy = plan.strides[1].back(),
                sz = plan.strides[2].back();
  parallel_for(n / inner, std::max<int64_t>(1, kElementwiseGrain / inner),
               [&](int64_t begin, int64_t end) {
                 int64_t offsets[3];
                 for (int64_t row = begin; row < end; ++row) {
                   row_offsets(plan, row, offsets);
                   const T* px = x + offsets[0];
                   const T* py = y + offsets[1];
                   const T* pz = z + offsets[2];
                   Out* po = out + row * inner;
                   for (int64_t i = 0; i < inner; ++i)
                     po[i] = op(px[i * sx], py[i * sy], pz[i * sz]);
                 }
               });
}

// Copies `in` of `in_shape` broadcast to `out_shape` (any trivially copyable T).
template <class T>
void broadcast_copy(const T* in, const Shape& in_shape, T* out, const Shape& out_shape) {
  const int64_t n = num_elements(out_shape);
  if (n == 0) return;
  if (num_elements(in_shape) == n) {
    std::copy(in, in + n, out);
    return;
  }
  const LoopPlan plan = plan_loops({in_shape}, out_shape);
  const int64_t inner = plan.dims.back();
  const int64_t stride = plan.strides[0].back();
  parallel_for(n / inner, std::max<int64_t>(1, kElementwiseGrain / inner),
               [&](int64_t begin, int64_t end) {
                 int64_t offset;
                 for (int64_t row = begin; row < end; ++row) {
                   row_offsets(plan, row, &offset);
                   T* po = out + row * inner;
                   if (stride == 1)
                     std::copy(in + offset, in + offset + inner, po);
                   else
                     std::fill(po, po + inner, in[offset]);
                 }
               });
}

}  // namespace est::ops::cpu
