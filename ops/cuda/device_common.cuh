// Helpers shared by the .cu files: the dtype switch, the grid-stride loop and its launch geometry,
// broadcast offsets, and math that picks the float or double function.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/check.h"
#include "ops/cuda/launch.h"

namespace est::ops::cuda {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

inline cudaStream_t as_stream(Stream stream) { return static_cast<cudaStream_t>(stream); }

#define EST_CUDA_LAUNCHED() EST_CUDA_CHECK(cudaGetLastError())

// for (int64_t i = ...; i < n; ...): this thread's share of [0, n) in a grid-stride loop (the
// grid of blocks_for(n) blocks of kThreads, or any other).
#define EST_GRID_STRIDE_LOOP(i, n)                                                       \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Calls fn(T{}) with T the C++ type of a numeric dtype (bool: `with_bool`).
template <class Fn>
void dispatch_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(float{});
    case DType::kF64: return fn(double{});
    case DType::kI32: return fn(int32_t{});
    case DType::kI64: return fn(int64_t{});
    case DType::kU8: return fn(uint8_t{});
    case DType::kBool: return fn(bool{});
    case DType::kBF16:  // fill, cast and broadcast copy handle it before dispatching; the
                        // registry computes every other kernel's bfloat16 in float32
      throw_cuda_error(cudaErrorInvalidValue, "dispatch_numeric(bfloat16)", __FILE__, __LINE__);
  }
}

template <class Fn>
void dispatch_floating(DType dtype, Fn&& fn) {
  if (dtype == DType::kF64) return fn(double{});
  return fn(float{});
}

// The host side of a grid-stride kernel over `total` elements of a floating dtype: nothing when
// total is 0, else launch(T{}, grid) with T the dtype's C++ type, which queues the kernel as
// kernel<T><<<grid, kThreads, 0, stream>>>(...); a failed launch throws.
template <class Launch>
void launch_floating(DType dtype, int64_t total, Launch&& launch) {
  if (total == 0) return;
  dispatch_floating(dtype, [&](auto tag) { launch(tag, blocks_for(total)); });
  EST_CUDA_LAUNCHED();
}

// Element offset of `operand` for the output element at flat `index`.
__device__ inline int64_t operand_offset(const Broadcast& b, int operand, int64_t index) {
  if (b.contiguous[operand]) return index;
  int64_t offset = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    const int64_t i = index % b.sizes[d];
    index /= b.sizes[d];
    offset += i * b.strides[operand][d];
  }
  return offset;
}

__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }
__device__ inline float log_of(float v) { return logf(v); }
__device__ inline double log_of(double v) { return log(v); }
__device__ inline float sqrt_of(float v) { return sqrtf(v); }
__device__ inline double sqrt_of(double v) { return sqrt(v); }
__device__ inline float tanh_of(float v) { return tanhf(v); }
__device__ inline double tanh_of(double v) { return tanh(v); }
__device__ inline float pow_of(float x, float y) { return powf(x, y); }
__device__ inline double pow_of(double x, double y) { return pow(x, y); }
template <class T>
__device__ inline T pow_of(T x, T y) {  // integers
  return static_cast<T>(pow(static_cast<double>(x), static_cast<double>(y)));
}

// Written so that neither branch overflows: exp of a non-positive number only.
template <class T>
__device__ inline T sigmoid_of(T v) {
  if (v >= T(0)) return T(1) / (T(1) + exp_of(-v));
  const T e = exp_of(v);
  return e / (T(1) + e);
}

}  // namespace est::ops::cuda
