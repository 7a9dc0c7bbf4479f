// CUDA reductions, one [outer, r, inner] pass at a time (ops/cuda/kernels.cpp splits any set of
// axes into passes, as the CPU kernels do). With many rows of inner == 1 each block reduces
// whole rows (threads stride over r, then a tree in shared memory); otherwise the pass follows
// a ColumnReducePlan (ops/cuda/reduce_plan.h): blocks of neighbouring columns by a chunk of
// rows, the rows split across blocks when there are few columns, chunks combined in order. Float
// sums accumulate in double, as the reference does; max keeps a NaN (any NaN wins), argmax returns
// the first maximum and counts a NaN as larger than any number.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/reduce_plan.h"

namespace est::ops::cuda {
namespace {

template <class T>
struct SumOf {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  __device__ static Acc init() { return Acc(0); }
  __device__ static Acc combine(Acc acc, Acc v) { return acc + v; }
};

template <class T>
struct MaxOf {
  using Acc = T;
  __device__ static T init() {
    if constexpr (std::is_same_v<T, float>)
      return -INFINITY;
    else if constexpr (std::is_same_v<T, double>)
      return -static_cast<double>(INFINITY);
    else if constexpr (std::is_same_v<T, int32_t>)
      return INT32_MIN;
    else if constexpr (std::is_same_v<T, int64_t>)
      return INT64_MIN;
    else
      return T(0);  // uint8
  }
  // A NaN on either side stays: once acc is NaN, neither test replaces it.
  __device__ static T combine(T acc, T v) { return (v > acc || v != v) ? v : acc; }
};

template <class Op, class T>
__global__ void reduce_rows_kernel(const T* in, T* out, int64_t outer, int64_t r) {
  using Acc = typename Op::Acc;
  __shared__ Acc partial[kThreads];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    Acc acc = Op::init();
    for (int64_t j = threadIdx.x; j < r; j += blockDim.x)
      acc = Op::combine(acc, static_cast<Acc>(in[row * r + j]));
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width)
        partial[threadIdx.x] = Op::combine(partial[threadIdx.x], partial[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = static_cast<T>(partial[0]);
    __syncthreads();
  }
}

// One block of the plan (ops/cuda/reduce_plan.h): blockDim.x neighbouring columns by
// blockDim.y rows (a power of two) of the row chunk blockIdx.y; a tree over y in shared memory.
// Writes the outputs (partials == nullptr) or the chunk's row of the partials.
template <class Op, class T>
__global__ void reduce_columns_kernel(const T* in, T* out, typename Op::Acc* partials,
                                      int64_t columns, int64_t r, int64_t inner,
                                      int64_t rows_per_chunk) {
  using Acc = typename Op::Acc;
  __shared__ Acc partial[kReduceBlockThreads];
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t first = chunk * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < r ? first + rows_per_chunk : r;
  Acc acc = Op::init();
  if (column < columns) {
    const T* base = in + (column / inner) * r * inner + column % inner;
    for (int64_t j = first + threadIdx.y; j < last; j += blockDim.y)
      acc = Op::combine(acc, static_cast<Acc>(base[j * inner]));
  }
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  partial[t] = acc;
  __syncthreads();
  for (unsigned width = blockDim.y / 2; width > 0; width /= 2) {
    if (threadIdx.y < width) partial[t] = Op::combine(partial[t], partial[t + width * blockDim.x]);
    __syncthreads();
  }
  if (threadIdx.y != 0 || column >= columns) return;
  if (partials == nullptr)
    out[column] = static_cast<T>(partial[t]);
  else
    partials[chunk * columns + column] = partial[t];
}

// out[i] = the chunks' partials of column i combined in chunk order.
template <class Op, class T>
__global__ void combine_chunks_kernel(const typename Op::Acc* partials, T* out, int64_t columns,
                                      int64_t chunks) {
  using Acc = typename Op::Acc;
  EST_GRID_STRIDE_LOOP(i, columns) {
    Acc acc = Op::init();
    for (int64_t k = 0; k < chunks; ++k) acc = Op::combine(acc, partials[k * columns + i]);
    out[i] = static_cast<T>(acc);
  }
}

template <class T>
__global__ void argmax_kernel(const T* in, int64_t* out, int64_t outer, int64_t r, int64_t inner) {
  const int64_t n = outer * inner;
  EST_GRID_STRIDE_LOOP(i, n) {
    const T* p = in + (i / inner) * r * inner + i % inner;
    T best = p[0];
    int64_t best_index = 0;
    for (int64_t j = 1; j < r; ++j) {
      const T v = p[j * inner];
      if (v > best || (v != v && best == best)) {
        best = v;
        best_index = j;
      }
    }
    out[i] = best_index;
  }
}

template <class Op, class T>
void launch_pass(const T* in, T* out, int64_t outer, int64_t r, int64_t inner,
                 const ColumnReducePlan* plan, void* partials, Stream stream) {
  if (plan == nullptr) {  // whole rows per block: enough rows to fill the GPU
    const unsigned blocks = static_cast<unsigned>(outer < 65536 ? outer : 65536);
    reduce_rows_kernel<Op, T><<<blocks, kThreads, 0, as_stream(stream)>>>(in, out, outer, r);
    return;
  }
  using Acc = typename Op::Acc;
  Acc* chunk_partials = plan->row_chunks > 1 ? static_cast<Acc*>(partials) : nullptr;
  const dim3 grid(static_cast<unsigned>(plan->column_blocks),
                  static_cast<unsigned>(plan->row_chunks));
  const dim3 block(static_cast<unsigned>(plan->column_threads),
                   static_cast<unsigned>(plan->row_threads));
  reduce_columns_kernel<Op, T><<<grid, block, 0, as_stream(stream)>>>(
      in, out, chunk_partials, plan->columns, r, inner, plan->rows_per_chunk);
  if (chunk_partials != nullptr)
    combine_chunks_kernel<Op, T><<<blocks_for(plan->columns), kThreads, 0, as_stream(stream)>>>(
        chunk_partials, out, plan->columns, plan->row_chunks);
}

}  // namespace

void reduce_pass(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t r,
                 int64_t inner, const ColumnReducePlan* plan, void* partials, Stream stream) {
  if (outer * inner == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* x = static_cast<const T*>(in);
      T* y = static_cast<T*>(out);
      if (op == ReduceOp::kSum)
        launch_pass<SumOf<T>>(x, y, outer, r, inner, plan, partials, stream);
      else
        launch_pass<MaxOf<T>>(x, y, outer, r, inner, plan, partials, stream);
    }
  });
  EST_CUDA_LAUNCHED();
}

void argmax(DType dtype, const void* in, int64_t* out, int64_t outer, int64_t r, int64_t inner,
            Stream stream) {
  if (outer * inner == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T><<<blocks_for(outer * inner), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), out, outer, r, inner);
  });
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
