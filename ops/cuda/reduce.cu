// CUDA reductions, one [outer, r, inner] pass at a time (ops/cuda/kernels.cpp splits any set of
// axes into passes, as the CPU kernels do). With inner == 1 each block reduces whole rows
// (threads stride over r, then a tree in shared memory); with inner > 1 each thread owns one
// output column and walks r, so neighbouring threads read neighbouring addresses. Float sums
// accumulate in double, as the reference does; max keeps a NaN (any NaN wins), argmax returns
// the first maximum and counts a NaN as larger than any number.
#include "ops/cuda/device_common.cuh"

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
    if constexpr (std::is_same_v<T, float>) return -INFINITY;
    else if constexpr (std::is_same_v<T, double>) return -static_cast<double>(INFINITY);
    else if constexpr (std::is_same_v<T, int32_t>) return INT32_MIN;
    else if constexpr (std::is_same_v<T, int64_t>) return INT64_MIN;
    else return T(0);  // uint8
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

template <class Op, class T>
__global__ void reduce_columns_kernel(const T* in, T* out, int64_t outer, int64_t r,
                                      int64_t inner) {
  using Acc = typename Op::Acc;
  const int64_t n = outer * inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t o = i / inner, c = i % inner;
    Acc acc = Op::init();
    for (int64_t j = 0; j < r; ++j) acc = Op::combine(acc, static_cast<Acc>(in[(o * r + j) * inner + c]));
    out[i] = static_cast<T>(acc);
  }
}

template <class T>
__global__ void argmax_kernel(const T* in, int64_t* out, int64_t outer, int64_t r, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
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
void launch_pass(const T* in, T* out, int64_t outer, int64_t r, int64_t inner, Stream stream) {
  if (inner == 1) {
    const unsigned blocks = static_cast<unsigned>(outer < 65536 ? outer : 65536);
    reduce_rows_kernel<Op, T><<<blocks, kThreads, 0, as_stream(stream)>>>(in, out, outer, r);
  } else {
    reduce_columns_kernel<Op, T><<<blocks_for(outer * inner), kThreads, 0, as_stream(stream)>>>(
        in, out, outer, r, inner);
  }
}

}  // namespace

void reduce_pass(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t r,
                 int64_t inner, Stream stream) {
  if (outer * inner == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* x = static_cast<const T*>(in);
      T* y = static_cast<T*>(out);
      if (op == ReduceOp::kSum)
        launch_pass<SumOf<T>>(x, y, outer, r, inner, stream);
      else
        launch_pass<MaxOf<T>>(x, y, outer, r, inner, stream);
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
