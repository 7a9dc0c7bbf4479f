// CUDA kernels of the fused optimizer updates: one launch per step over every chunk of every
// variable (see optimizer_launch.h for the table, a kernel argument), one thread per element of
// a chunk.
//
// The arithmetic is the CPU reference's (ops/cpu/optimizer_kernels.cpp) operation for
// operation, each rounded to the dtype with the _rn intrinsics so that nvcc cannot contract a
// multiply and an add into an FMA: the GPU gives the CPU's bits for momentum, Adam, Adagrad and
// RMSProp. SGD is one fused multiply-add, like the CPU's vectorised add_scaled.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/optimizer_launch.h"

namespace est::ops::cuda {
namespace {

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrt_rn(double a) { return __dsqrt_rn(a); }

template <class T>
struct Scalars {
  T s[6];
};

template <class T, FusedRule rule>
__device__ inline void update(T* const* p, int64_t j, const Scalars<T>& c) {
  T* var = p[0];
  const T g = p[1][j];
  if constexpr (rule == FusedRule::kSgd) {
    var[j] = fma(g, c.s[0], var[j]);
  } else if constexpr (rule == FusedRule::kMomentum || rule == FusedRule::kNesterov) {
    const T a = add_rn(mul_rn(p[2][j], c.s[1]), g);
    p[2][j] = a;
    const T step = rule == FusedRule::kNesterov ? add_rn(mul_rn(g, c.s[0]), mul_rn(a, c.s[2]))
                                                : mul_rn(a, c.s[0]);
    var[j] = sub_rn(var[j], step);
  } else if constexpr (rule == FusedRule::kAdam) {
    const T m = add_rn(mul_rn(p[2][j], c.s[1]), mul_rn(g, c.s[2]));
    const T v = add_rn(mul_rn(p[3][j], c.s[3]), mul_rn(mul_rn(g, g), c.s[4]));
    p[2][j] = m;
    p[3][j] = v;
    var[j] = sub_rn(var[j], div_rn(mul_rn(m, c.s[0]), add_rn(sqrt_rn(v), c.s[5])));
  } else if constexpr (rule == FusedRule::kAdagrad) {
    const T a = add_rn(p[2][j], mul_rn(g, g));
    p[2][j] = a;
    var[j] = sub_rn(var[j], div_rn(mul_rn(g, c.s[0]), sqrt_rn(a)));
  } else {  // RMSProp, plain or centered
    const T ms = add_rn(mul_rn(p[2][j], c.s[1]), mul_rn(mul_rn(g, g), c.s[2]));
    p[2][j] = ms;
    T denominator = ms;
    if constexpr (rule == FusedRule::kRmspropCentered) {
      const T mg = add_rn(mul_rn(p[4][j], c.s[1]), mul_rn(g, c.s[2]));
      p[4][j] = mg;
      denominator = sub_rn(ms, mul_rn(mg, mg));
    }
    const T scaled = div_rn(mul_rn(g, c.s[0]), sqrt_rn(add_rn(denominator, c.s[4])));
    const T mom = add_rn(mul_rn(p[3][j], c.s[3]), scaled);
    p[3][j] = mom;
    var[j] = sub_rn(var[j], mom);
  }
}

template <class T, FusedRule rule>
__global__ void fused_update_kernel(const FusedTable table, Scalars<T> scalars) {
  const int64_t count = table.count;
  const int64_t total_chunks = table.chunk_begin[count];
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    // The last variable whose first chunk is at or before this one (empty variables own none).
    int64_t low = 0, high = count - 1;
    while (low < high) {
      const int64_t middle = (low + high + 1) / 2;
      if (table.chunk_begin[middle] <= chunk)
        low = middle;
      else
        high = middle - 1;
    }
    const int64_t t = low;
    T* pointers[kFusedMaxLists];
    for (int list = 0; list < kFusedMaxLists; ++list)
      pointers[list] = static_cast<T*>(table.pointers[list][t]);
    const int64_t begin = (chunk - table.chunk_begin[t]) * kFusedChunk;
    const int64_t end = begin + kFusedChunk < table.sizes[t] ? begin + kFusedChunk : table.sizes[t];
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x)
      update<T, rule>(pointers, j, scalars);
  }
}

template <class T, FusedRule rule>
void launch(const FusedTable& table, const FusedScalars& values, cudaStream_t stream) {
  Scalars<T> scalars;
  for (int i = 0; i < 6; ++i) scalars.s[i] = static_cast<T>(values.values[i]);
  const int64_t total_chunks = table.chunk_begin[table.count];
  const int64_t blocks = total_chunks < 65535 ? total_chunks : 65535;
  fused_update_kernel<T, rule>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(table, scalars);
}

template <class T>
void launch_rule(FusedRule rule, const FusedTable& table, const FusedScalars& values,
                 cudaStream_t stream) {
  switch (rule) {
    case FusedRule::kSgd:
      return launch<T, FusedRule::kSgd>(table, values, stream);
    case FusedRule::kMomentum:
      return launch<T, FusedRule::kMomentum>(table, values, stream);
    case FusedRule::kNesterov:
      return launch<T, FusedRule::kNesterov>(table, values, stream);
    case FusedRule::kAdam:
      return launch<T, FusedRule::kAdam>(table, values, stream);
    case FusedRule::kAdagrad:
      return launch<T, FusedRule::kAdagrad>(table, values, stream);
    case FusedRule::kRmsprop:
      return launch<T, FusedRule::kRmsprop>(table, values, stream);
    case FusedRule::kRmspropCentered:
      return launch<T, FusedRule::kRmspropCentered>(table, values, stream);
  }
}

}  // namespace

void fused_update(FusedRule rule, DType dtype, const FusedTable& table, const FusedScalars& scalars,
                  void* stream) {
  if (table.count == 0 || table.chunk_begin[table.count] == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_rule<T>(rule, table, scalars, as_stream(stream));
  });
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
