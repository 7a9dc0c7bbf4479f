// Host entry points of the CUDA layout and indexing kernels (ops/cuda/layout.cu), over raw
// device pointers; ops/cuda/layout_kernels.cpp turns the registry's Tensors into these.
//
// Shared by g++ and nvcc, so plain headers only (as launch.h). Elements are moved as unsigned
// integers of the dtype's size (`element_size` 1, 2, 4 or 8 bytes), so the layout kernels serve
// every dtype. Every function queues its kernels on `stream` and returns at once, except the
// bounds check of gather, which waits for its flag (see gather).
#pragma once

#include <cstdint>

#include "ops/cuda/launch.h"

namespace est::ops::cuda {

// A strided view of a buffer read or written in the row-major order of `sizes`: element i of
// the contiguous side is element sum(index_d * strides[d]) of the strided side.
struct StridedView {
  int rank = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

// contiguous[i] = view[offset(i)] (transpose, slice) or view[offset(i)] = contiguous[i]
// (slice gradient); `view` points at the view's first element, n = prod(sizes).
void strided_gather(int element_size, const void* view, void* contiguous, int64_t n,
                    const StridedView& layout, Stream stream);
void strided_scatter(int element_size, void* view, const void* contiguous, int64_t n,
                     const StridedView& layout, Stream stream);

// out [outer, out_row] columns [column, column + chunk) = in [outer, chunk] (one concat input).
void copy_columns(int element_size, const void* in, void* out, int64_t outer, int64_t chunk,
                  int64_t out_row, int64_t column, Stream stream);

// params [outer, rows, inner], indices [count] (int32 or int64) -> out [outer, count, inner].
// An id outside [0, rows) gives zeros; with `wait` the smallest position holding one is
// returned (the call waits for the kernel to know it), else (or when every id is in range) -1.
int64_t gather(int element_size, const void* params, DType index_dtype, const void* indices,
               void* out, int64_t outer, int64_t rows, int64_t inner, int64_t count,
               int64_t* device_flag, bool wait, Stream stream);
// dparams [outer, rows, inner] (zeroed here) += grad [outer, count, inner] at the ids, with
// atomic adds (float32, float64); ids out of range are skipped (forward reported them).
void gather_gradient(DType dtype, const void* grad, DType index_dtype, const void* indices,
                     void* dparams, int64_t outer, int64_t rows, int64_t inner, int64_t count,
                     Stream stream);
// out [count, depth] of `dtype`: on_value at each id in [0, depth), off_value elsewhere.
void one_hot(DType index_dtype, const void* indices, DType dtype, void* out, int64_t count,
             int64_t depth, double on_value, double off_value, Stream stream);

}  // namespace est::ops::cuda
