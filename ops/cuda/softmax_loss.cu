// CUDA kernels of softmax and the fused cross-entropies
// (ops/cuda/softmax_loss.h), computing what ops/cpu/softmax.h and ops/cpu/loss_kernels.cpp do.
//
// A softmax over the last axis (inner == 1) and every cross-entropy row get one thread block
// per row: threads stride over the classes, then warp shuffles and one shared slot per warp
// combine the row's max (subtracted before exp, so logits of 1e4 stay finite) and its sum. The
// max keeps the first operand unless the second is larger (std::max's rule: a NaN logit does
// not become the max, and its row turns to NaN through the sum, as on the CPU). Softmax along
// another axis (inner > 1) gives one thread to each [outer, inner] column, so that
// neighbouring threads read neighbouring addresses. Sums accumulate in the tensor's type, as
// the reference does.
//
// The sparse cross-entropy checks each row's class id on the device: a row with an id outside
// [0, classes) computes nothing and lowers a flag (atomicMin of its row), which the host reads
// back after the kernel to throw the reference's error. Its loss and probabilities are NaN,
// which is all a caller that does not wait for the flag (a CUDA graph capture) sees, as with
// TensorFlow's GPU kernel. Dropout's mask is in dropout.cu.
#include <math_constants.h>

#include <climits>

#include "ops/cuda/device_common.cuh"
#include "ops/cuda/id_check.h"
#include "ops/cuda/softmax_loss.h"

namespace est::ops::cuda {
namespace {

constexpr int kWarp = 32;

template <class T>
__device__ inline T negative_infinity() {
  return -static_cast<T>(INFINITY);
}

// std::max(a, b): b only when a < b.
template <class T>
__device__ inline T max_of(T a, T b) {
  return a < b ? b : a;
}

__device__ inline float log1p_of(float v) { return log1pf(v); }
__device__ inline double log1p_of(double v) { return log1p(v); }
__device__ inline float abs_of(float v) { return fabsf(v); }
__device__ inline double abs_of(double v) { return fabs(v); }

struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return max_of(a, b);
  }
};
struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Combines v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds 32 values; the leading barrier lets the block reuse it call after call.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* shared) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / kWarp) ? shared[lane] : identity;
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// The max and the sum of exp(x - max) of one row, over the block; exps are stored in `e` when
// not null.
template <class T>
struct RowStats {
  T max, total;
};
template <class T>
__device__ RowStats<T> row_stats(const T* x, T* e, int64_t classes, T* shared) {
  T m = negative_infinity<T>();
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = max_of(m, x[c]);
  m = block_reduce(m, MaxOp{}, negative_infinity<T>(), shared);
  T total = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    const T v = exp_of(x[c] - m);
    if (e != nullptr) e[c] = v;
    total += v;
  }
  total = block_reduce(total, SumOp{}, T(0), shared);
  return {m, total};
}

template <class T>
__global__ void softmax_rows_kernel(const T* in, T* out, int64_t rows, int64_t classes, bool log) {
  __shared__ T shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * classes;
    T* y = out + row * classes;
    const RowStats<T> stats = row_stats(x, log ? nullptr : y, classes, shared);
    if (log) {
      const T shift = stats.max + log_of(stats.total);
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) y[c] = x[c] - shift;
    } else {
      const T scale = T(1) / stats.total;
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) y[c] *= scale;
    }
  }
}

// One thread per [outer, inner] column, walking the classes as the reference does.
template <class T>
__global__ void softmax_columns_kernel(const T* in, T* out, int64_t outer, int64_t classes,
                                       int64_t inner, bool log) {
  EST_GRID_STRIDE_LOOP(column, outer * inner) {
    const int64_t base = (column / inner) * classes * inner + column % inner;
    const T* x = in + base;
    T* y = out + base;
    T m = negative_infinity<T>();
    for (int64_t c = 0; c < classes; ++c) m = max_of(m, x[c * inner]);
    T total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const T e = exp_of(x[c * inner] - m);
      y[c * inner] = e;
      total += e;
    }
    if (log) {
      const T shift = m + log_of(total);
      for (int64_t c = 0; c < classes; ++c) y[c * inner] = x[c * inner] - shift;
    } else {
      const T scale = T(1) / total;
      for (int64_t c = 0; c < classes; ++c) y[c * inner] *= scale;
    }
  }
}

template <class T>
__global__ void softmax_gradient_rows_kernel(const T* grad, const T* y, T* dx, int64_t rows,
                                             int64_t classes, bool log) {
  __shared__ T shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* g = grad + row * classes;
    const T* out = y + row * classes;
    T* d = dx + row * classes;
    T total = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) total += log ? g[c] : g[c] * out[c];
    total = block_reduce(total, SumOp{}, T(0), shared);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      d[c] = log ? g[c] - exp_of(out[c]) * total : out[c] * (g[c] - total);
  }
}

template <class T>
__global__ void softmax_gradient_columns_kernel(const T* grad, const T* y, T* dx, int64_t outer,
                                                int64_t classes, int64_t inner, bool log) {
  EST_GRID_STRIDE_LOOP(column, outer * inner) {
    const int64_t base = (column / inner) * classes * inner + column % inner;
    const T* g = grad + base;
    const T* out = y + base;
    T* d = dx + base;
    T total = 0;
    for (int64_t c = 0; c < classes; ++c)
      total += log ? g[c * inner] : g[c * inner] * out[c * inner];
    for (int64_t c = 0; c < classes; ++c)
      d[c * inner] = log ? g[c * inner] - exp_of(out[c * inner]) * total
                         : out[c * inner] * (g[c * inner] - total);
  }
}

template <class T, class I>
__global__ void sparse_cross_entropy_kernel(const I* labels, const T* logits, T* loss, T* probs,
                                            int64_t rows, int64_t classes,
                                            unsigned long long* bad_row) {
  __shared__ T shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t label = static_cast<int64_t>(labels[row]);
    if (label < 0 || label >= classes) {  // the same for the whole block: no barrier skipped
      if (threadIdx.x == 0) {
        atomicMin(bad_row, static_cast<unsigned long long>(row));
        loss[row] = CUDART_NAN;  // what an unchecked step (a CUDA graph) sees, as TF's GPU kernel
      }
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        probs[row * classes + c] = CUDART_NAN;
      continue;
    }
    const T* x = logits + row * classes;
    T* p = probs + row * classes;
    const RowStats<T> stats = row_stats(x, p, classes, shared);
    const T scale = T(1) / stats.total;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) p[c] *= scale;
    if (threadIdx.x == 0) loss[row] = (stats.max + log_of(stats.total)) - x[label];
  }
}

template <class T, class I>
__global__ void sparse_cross_entropy_gradient_kernel(const T* grad, const I* labels, const T* probs,
                                                     T* dlogits, int64_t n, int64_t classes) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t row = i / classes;
    const T d = grad[row] * probs[i];
    dlogits[i] = static_cast<int64_t>(labels[row]) == i % classes ? d - grad[row] : d;
  }
}

template <class T>
__global__ void cross_entropy_kernel(const T* labels, const T* logits, T* loss, T* probs, T* lse,
                                     int64_t rows, int64_t classes) {
  __shared__ T shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * classes;
    const T* z = labels + row * classes;
    T* p = probs + row * classes;
    const RowStats<T> stats = row_stats(x, p, classes, shared);
    const T scale = T(1) / stats.total;
    const T l = stats.max + log_of(stats.total);
    T total = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      p[c] *= scale;
      total += z[c] * (l - x[c]);
    }
    total = block_reduce(total, SumOp{}, T(0), shared);
    if (threadIdx.x == 0) {
      loss[row] = total;
      lse[row] = l;
    }
  }
}

template <class T>
__global__ void cross_entropy_gradient_kernel(const T* grad, const T* labels, const T* logits,
                                              const T* probs, const T* lse, T* dlabels, T* dlogits,
                                              int64_t rows, int64_t classes) {
  __shared__ T shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * classes;
    const T g = grad[row];
    if (dlabels != nullptr)
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        dlabels[base + c] = g * (lse[row] - logits[base + c]);
    if (dlogits != nullptr) {
      T mass = 0;
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) mass += labels[base + c];
      mass = block_reduce(mass, SumOp{}, T(0), shared);
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        dlogits[base + c] = g * (probs[base + c] * mass - labels[base + c]);
    }
  }
}

template <class T>
__global__ void sigmoid_cross_entropy_kernel(const T* labels, const T* logits, T* loss, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const T x = logits[i];
    loss[i] = max_of(x, T(0)) - x * labels[i] + log1p_of(exp_of(-abs_of(x)));
  }
}

template <class T>
__global__ void sigmoid_cross_entropy_gradient_kernel(const T* grad, const T* labels,
                                                      const T* logits, T* dlabels, T* dlogits,
                                                      int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) {
    if (dlabels != nullptr) dlabels[i] = -grad[i] * logits[i];
    if (dlogits != nullptr) dlogits[i] = grad[i] * (sigmoid_of(logits[i]) - labels[i]);
  }
}

// Threads for one block per row: the classes rounded up to whole warps, at most kThreads.
unsigned row_threads(int64_t classes) {
  const int64_t warps = (classes + kWarp - 1) / kWarp;
  return static_cast<unsigned>(warps < 1 ? kWarp
                                         : (warps * kWarp > kThreads ? kThreads : warps * kWarp));
}
unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(rows < 65536 ? rows : 65536); }

// Reads the flag the kernels lowered: -1 when none did.
int64_t read_flag(unsigned long long* flag, Stream stream) {
  unsigned long long value = 0;
  EST_CUDA_CHECK(
      cudaMemcpyAsync(&value, flag, sizeof(value), cudaMemcpyDeviceToHost, as_stream(stream)));
  EST_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
  return value == ULLONG_MAX ? -1 : static_cast<int64_t>(value);
}

}  // namespace

void softmax(DType dtype, const void* in, void* out, int64_t outer, int64_t classes, int64_t inner,
             bool log, Stream stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || classes == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    if (inner == 1)
      softmax_rows_kernel<T><<<row_blocks(rows), row_threads(classes), 0, as_stream(stream)>>>(
          x, y, rows, classes, log);
    else
      softmax_columns_kernel<T>
          <<<blocks_for(rows), kThreads, 0, as_stream(stream)>>>(x, y, outer, classes, inner, log);
  });
  EST_CUDA_LAUNCHED();
}

void softmax_gradient(DType dtype, const void* grad, const void* y, void* dx, int64_t outer,
                      int64_t classes, int64_t inner, bool log, Stream stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || classes == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad);
    const T* out = static_cast<const T*>(y);
    T* d = static_cast<T*>(dx);
    if (inner == 1)
      softmax_gradient_rows_kernel<T>
          <<<row_blocks(rows), row_threads(classes), 0, as_stream(stream)>>>(g, out, d, rows,
                                                                             classes, log);
    else
      softmax_gradient_columns_kernel<T><<<blocks_for(rows), kThreads, 0, as_stream(stream)>>>(
          g, out, d, outer, classes, inner, log);
  });
  EST_CUDA_LAUNCHED();
}

int64_t sparse_cross_entropy(DType dtype, DType index_dtype, const void* labels, const void* logits,
                             void* loss, void* probs, int64_t rows, int64_t classes,
                             int64_t* device_flag, bool wait, Stream stream) {
  if (rows == 0) return -1;
  auto* flag = reinterpret_cast<unsigned long long*>(device_flag);
  EST_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof(*flag), as_stream(stream)));  // "none"
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto index_tag) {
      using I = decltype(index_tag);
      sparse_cross_entropy_kernel<T, I>
          <<<row_blocks(rows), row_threads(classes), 0, as_stream(stream)>>>(
              static_cast<const I*>(labels), static_cast<const T*>(logits), static_cast<T*>(loss),
              static_cast<T*>(probs), rows, classes, flag);
    };
    if (index_dtype == DType::kI32)
      launch(int32_t{});
    else
      launch(int64_t{});
  });
  EST_CUDA_LAUNCHED();
  return wait ? read_flag(flag, stream) : -1;
}

void sparse_cross_entropy_gradient(DType dtype, DType index_dtype, const void* grad,
                                   const void* labels, const void* probs, void* dlogits,
                                   int64_t rows, int64_t classes, Stream stream) {
  const int64_t n = rows * classes;
  if (n == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto index_tag) {
      using I = decltype(index_tag);
      sparse_cross_entropy_gradient_kernel<T, I><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const T*>(grad), static_cast<const I*>(labels), static_cast<const T*>(probs),
          static_cast<T*>(dlogits), n, classes);
    };
    if (index_dtype == DType::kI32)
      launch(int32_t{});
    else
      launch(int64_t{});
  });
  EST_CUDA_LAUNCHED();
}

void cross_entropy(DType dtype, const void* labels, const void* logits, void* loss, void* probs,
                   void* lse, int64_t rows, int64_t classes, Stream stream) {
  if (rows == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_kernel<T><<<row_blocks(rows), row_threads(classes), 0, as_stream(stream)>>>(
        static_cast<const T*>(labels), static_cast<const T*>(logits), static_cast<T*>(loss),
        static_cast<T*>(probs), static_cast<T*>(lse), rows, classes);
  });
  EST_CUDA_LAUNCHED();
}

void cross_entropy_gradient(DType dtype, const void* grad, const void* labels, const void* logits,
                            const void* probs, const void* lse, void* dlabels, void* dlogits,
                            int64_t rows, int64_t classes, Stream stream) {
  if (rows == 0 || classes == 0 || (dlabels == nullptr && dlogits == nullptr)) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_gradient_kernel<T>
        <<<row_blocks(rows), row_threads(classes), 0, as_stream(stream)>>>(
            static_cast<const T*>(grad), static_cast<const T*>(labels),
            static_cast<const T*>(logits), static_cast<const T*>(probs), static_cast<const T*>(lse),
            static_cast<T*>(dlabels), static_cast<T*>(dlogits), rows, classes);
  });
  EST_CUDA_LAUNCHED();
}

void sigmoid_cross_entropy(DType dtype, const void* labels, const void* logits, void* loss,
                           int64_t n, Stream stream) {
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    sigmoid_cross_entropy_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(labels), static_cast<const T*>(logits), static_cast<T*>(loss), n);
  });
}

void sigmoid_cross_entropy_gradient(DType dtype, const void* grad, const void* labels,
                                    const void* logits, void* dlabels, void* dlogits, int64_t n,
                                    Stream stream) {
  if (n == 0 || (dlabels == nullptr && dlogits == nullptr)) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    sigmoid_cross_entropy_gradient_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(grad), static_cast<const T*>(labels), static_cast<const T*>(logits),
        static_cast<T*>(dlabels), static_cast<T*>(dlogits), n);
  });
  EST_CUDA_LAUNCHED();
}

__global__ void queue_bad_id_record_kernel(const unsigned long long* flag, bool wide_ids,
                                           const void* ids, IdCheckRecord* record, int32_t op,
                                           int64_t limit, int32_t axis) {
  const unsigned long long position = *flag;
  if (position == ULLONG_MAX || record->op != 0) return;  // the first bad id is kept
  record->axis = axis;
  record->position = static_cast<int64_t>(position);
  record->id = wide_ids ? static_cast<const int64_t*>(ids)[position]
                        : static_cast<const int32_t*>(ids)[position];
  record->limit = limit;
  __threadfence_system();  // the fields before the op that says they are there
  record->op = op;
}

void queue_bad_id_record(const int64_t* device_flag, bool wide_ids, const void* ids,
                         void* device_record, int32_t op, int64_t limit, int32_t axis,
                         Stream stream) {
  queue_bad_id_record_kernel<<<1, 1, 0, as_stream(stream)>>>(
      reinterpret_cast<const unsigned long long*>(device_flag), wide_ids, ids,
      static_cast<IdCheckRecord*>(device_record), op, limit, axis);
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
