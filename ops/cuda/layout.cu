// CUDA kernels of the layout and indexing ops (ops/cuda/layout.h): strided copies for transpose,
// slice and the slice gradient, column blocks for concat, gather with its bounds flag, its
// scatter-add gradient, and one_hot. Each is a grid-stride loop over the elements it writes
// (the gradient's: over grad), one thread per element, as the reference kernels in
// ops/cpu/array_kernels.cpp compute them.
//
// gather checks every id on the device: an id outside [0, rows) copies nothing and lowers a
// flag (atomicMin of its position), which the host reads back after the kernel, so that the op
// throws the reference's error naming the first bad id instead of reading out of bounds.
#include <climits>

#include "ops/cuda/device_common.cuh"
#include "ops/cuda/layout.h"
#include "ops/element_bytes.h"

namespace est::ops::cuda {
namespace {

template <class Fn>
void dispatch_index(DType index_dtype, Fn&& fn) {
  if (index_dtype == DType::kI32) return fn(int32_t{});
  return fn(int64_t{});
}

__device__ inline int64_t view_offset(const StridedView& v, int64_t index) {
  int64_t offset = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    offset += (index % v.sizes[d]) * v.strides[d];
    index /= v.sizes[d];
  }
  return offset;
}

template <class U>
__global__ void strided_gather_kernel(const U* view, U* contiguous, int64_t n, StridedView v) {
  EST_GRID_STRIDE_LOOP(i, n) contiguous[i] = view[view_offset(v, i)];
}

template <class U>
__global__ void strided_scatter_kernel(U* view, const U* contiguous, int64_t n, StridedView v) {
  EST_GRID_STRIDE_LOOP(i, n) view[view_offset(v, i)] = contiguous[i];
}

template <class U>
__global__ void copy_columns_kernel(const U* in, U* out, int64_t n, int64_t chunk, int64_t out_row,
                                    int64_t column) {
  EST_GRID_STRIDE_LOOP(i, n) out[(i / chunk) * out_row + column + i % chunk] = in[i];
}

// One thread per output element of out [outer, count, inner].
template <class U, class I>
__global__ void gather_kernel(const U* params, const I* ids, U* out, int64_t n, int64_t rows,
                              int64_t inner, int64_t count, unsigned long long* bad_position) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % inner, task = i / inner;
    const int64_t o = task / count, position = task % count;
    const int64_t id = static_cast<int64_t>(ids[position]);
    if (id < 0 || id >= rows) {
      atomicMin(bad_position, static_cast<unsigned long long>(position));
      out[i] = U{};  // zeros, what an unchecked call (a CUDA graph) sees, as TF's GPU gather
      continue;
    }
    out[i] = params[(o * rows + id) * inner + c];
  }
}

template <class I>
__global__ void check_ids_kernel(const I* ids, int64_t count, int64_t rows,
                                 unsigned long long* bad_position) {
  EST_GRID_STRIDE_LOOP(i, count) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= rows) atomicMin(bad_position, static_cast<unsigned long long>(i));
  }
}

// One thread per element of grad [outer, count, inner].
template <class T, class I>
__global__ void gather_gradient_kernel(const T* grad, const I* ids, T* dparams, int64_t n,
                                       int64_t rows, int64_t inner, int64_t count) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % inner, task = i / inner;
    const int64_t o = task / count, position = task % count;
    const int64_t id = static_cast<int64_t>(ids[position]);
    if (id >= 0 && id < rows) atomicAdd(dparams + (o * rows + id) * inner + c, grad[i]);
  }
}

template <class T, class I>
__global__ void one_hot_kernel(const I* ids, T* out, int64_t n, int64_t depth, T on, T off) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t id = static_cast<int64_t>(ids[i / depth]);
    out[i] = id == i % depth ? on : off;
  }
}

}  // namespace

void strided_gather(int element_size, const void* view, void* contiguous, int64_t n,
                    const StridedView& layout, Stream stream) {
  if (n == 0) return;
  dispatch_element_bytes(static_cast<size_t>(element_size), [&](auto tag) {
    using U = decltype(tag);
    strided_gather_kernel<U><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const U*>(view), static_cast<U*>(contiguous), n, layout);
  });
  EST_CUDA_LAUNCHED();
}

void strided_scatter(int element_size, void* view, const void* contiguous, int64_t n,
                     const StridedView& layout, Stream stream) {
  if (n == 0) return;
  dispatch_element_bytes(static_cast<size_t>(element_size), [&](auto tag) {
    using U = decltype(tag);
    strided_scatter_kernel<U><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<U*>(view), static_cast<const U*>(contiguous), n, layout);
  });
  EST_CUDA_LAUNCHED();
}

void copy_columns(int element_size, const void* in, void* out, int64_t outer, int64_t chunk,
                  int64_t out_row, int64_t column, Stream stream) {
  const int64_t n = outer * chunk;
  if (n == 0) return;
  dispatch_element_bytes(static_cast<size_t>(element_size), [&](auto tag) {
    using U = decltype(tag);
    copy_columns_kernel<U><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const U*>(in), static_cast<U*>(out), n, chunk, out_row, column);
  });
  EST_CUDA_LAUNCHED();
}

int64_t gather(int element_size, const void* params, DType index_dtype, const void* indices,
               void* out, int64_t outer, int64_t rows, int64_t inner, int64_t count,
               int64_t* device_flag, bool wait, Stream stream) {
  const int64_t n = outer * count * inner;
  if (count == 0) return -1;
  auto* flag = reinterpret_cast<unsigned long long*>(device_flag);
  EST_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof(*flag), as_stream(stream)));  // "none"
  dispatch_index(index_dtype, [&](auto index_tag) {
    using I = decltype(index_tag);
    if (n == 0) {  // nothing to copy: every id is still checked, as the reference does
      check_ids_kernel<I><<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
          static_cast<const I*>(indices), count, rows, flag);
      return;
    }
    dispatch_element_bytes(static_cast<size_t>(element_size), [&](auto tag) {
      using U = decltype(tag);
      gather_kernel<U, I><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const U*>(params), static_cast<const I*>(indices), static_cast<U*>(out), n,
          rows, inner, count, flag);
    });
  });
  EST_CUDA_LAUNCHED();
  if (!wait) return -1;
  unsigned long long position = 0;
  EST_CUDA_CHECK(cudaMemcpyAsync(&position, flag, sizeof(position), cudaMemcpyDeviceToHost,
                                 as_stream(stream)));
  EST_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
  return position == ULLONG_MAX ? -1 : static_cast<int64_t>(position);
}

void gather_gradient(DType dtype, const void* grad, DType index_dtype, const void* indices,
                     void* dparams, int64_t outer, int64_t rows, int64_t inner, int64_t count,
                     Stream stream) {
  const int64_t total = outer * rows * inner;
  if (total == 0) return;
  const int64_t element = dtype == DType::kF64 ? 8 : 4;
  EST_CUDA_CHECK(cudaMemsetAsync(dparams, 0, static_cast<size_t>(total * element),
                                 as_stream(stream)));  // +0.0 in both float types
  const int64_t n = outer * count * inner;
  if (n == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(index_dtype, [&](auto index_tag) {
      using I = decltype(index_tag);
      gather_gradient_kernel<T, I><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const T*>(grad), static_cast<const I*>(indices), static_cast<T*>(dparams), n,
          rows, inner, count);
    });
  });
  EST_CUDA_LAUNCHED();
}

void one_hot(DType index_dtype, const void* indices, DType dtype, void* out, int64_t count,
             int64_t depth, double on_value, double off_value, Stream stream) {
  const int64_t n = count * depth;
  if (n == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(index_dtype, [&](auto index_tag) {
      using I = decltype(index_tag);
      one_hot_kernel<T, I><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const I*>(indices), static_cast<T*>(out), n, depth, static_cast<T>(on_value),
          static_cast<T>(off_value));
    });
  });
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
