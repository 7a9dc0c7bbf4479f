// Batch normalization over x [rows, C] (channels fastest: NHWC images and [N, C] activations
// alike), with ops/cpu/batch_norm_reference's arithmetic: per-channel sums in double, the
// variance in a second pass around the mean and biased (divided by rows), any epsilon >= 0,
// gamma and beta optional, and a gradient for fixed (inference) statistics too. cuDNN's batch
// norm expresses none of the last four (its epsilon must be >= CUDNN_BN_MIN_EPSILON, its running
// variance is Bessel-corrected, scale and bias are required, backward assumes batch statistics),
// so these are plain kernels. Per-channel sums: one block per tile of 32 channels, threadIdx.x
// the channel (coalesced reads of a row), threadIdx.y a lane of rows, reduced in shared memory.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

constexpr int kTile = 32;   // channels per block
constexpr int kLanes = 16;  // row lanes per block (a power of two)

// Sums v over the block's row lanes: every thread of column threadIdx.x gets the total.
__device__ double lane_sum(double (*shared)[kTile], double v) {
  shared[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  for (int step = kLanes / 2; step > 0; step >>= 1) {
    if (static_cast<int>(threadIdx.y) < step)
      shared[threadIdx.y][threadIdx.x] += shared[threadIdx.y + step][threadIdx.x];
    __syncthreads();
  }
  const double total = shared[0][threadIdx.x];
  __syncthreads();  // the buffer is reused by the next sum
  return total;
}

template <class T>
__global__ void statistics_kernel(const T* x, T* mean, T* variance, int64_t rows,
                                  int64_t channels) {
  __shared__ double shared[kLanes][kTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool active = c < channels;
  double sum = 0.0;
  if (active)
    for (int64_t r = threadIdx.y; r < rows; r += kLanes)
      sum += static_cast<double>(x[r * channels + c]);
  const double m = lane_sum(shared, sum) / static_cast<double>(rows > 1 ? rows : 1);
  double squares = 0.0;
  if (active)
    for (int64_t r = threadIdx.y; r < rows; r += kLanes) {
      const double d = static_cast<double>(x[r * channels + c]) - m;
      squares += d * d;
    }
  const double v = lane_sum(shared, squares) / static_cast<double>(rows > 1 ? rows : 1);
  if (active && threadIdx.y == 0) {
    mean[c] = static_cast<T>(m);
    variance[c] = static_cast<T>(v);
  }
}

template <class T>
__global__ void forward_kernel(const T* x, const T* gamma, const T* beta, const T* mean,
                               const T* variance, double epsilon, T* y, int64_t n,
                               int64_t channels) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t c = i % channels;
    const double inv_std = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    const double normalized = (static_cast<double>(x[i]) - static_cast<double>(mean[c])) * inv_std;
    const double scale = gamma != nullptr ? static_cast<double>(gamma[c]) : 1.0;
    const double shift = beta != nullptr ? static_cast<double>(beta[c]) : 0.0;
    y[i] = static_cast<T>(normalized * scale + shift);
  }
}

template <class T>
__global__ void gradient_sums_kernel(const T* x, const T* mean, const T* variance, const T* grad,
                                     double epsilon, double* sums, T* grad_gamma, T* grad_beta,
                                     int64_t rows, int64_t channels) {
  __shared__ double shared[kLanes][kTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool active = c < channels;
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  if (active) {
    const double m = static_cast<double>(mean[c]);
    const double inv_std = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    for (int64_t r = threadIdx.y; r < rows; r += kLanes) {
      const double g = static_cast<double>(grad[r * channels + c]);
      sum_dy += g;
      sum_dy_xhat += g * ((static_cast<double>(x[r * channels + c]) - m) * inv_std);
    }
  }
  sum_dy = lane_sum(shared, sum_dy);
  sum_dy_xhat = lane_sum(shared, sum_dy_xhat);
  if (active && threadIdx.y == 0) {
    sums[c] = sum_dy;
    sums[channels + c] = sum_dy_xhat;
    if (grad_gamma != nullptr) grad_gamma[c] = static_cast<T>(sum_dy_xhat);
    if (grad_beta != nullptr) grad_beta[c] = static_cast<T>(sum_dy);
  }
}

template <class T>
__global__ void grad_x_kernel(const T* x, const T* gamma, const T* mean, const T* variance,
                              const T* grad, const double* sums, double epsilon, bool training,
                              T* grad_x, int64_t n, int64_t rows, int64_t channels) {
  const double inv_rows = 1.0 / static_cast<double>(rows > 1 ? rows : 1);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t c = i % channels;
    const double inv_std = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    const double scale = gamma != nullptr ? static_cast<double>(gamma[c]) : 1.0;
    const double g = static_cast<double>(grad[i]);
    double value = g;
    if (training) {
      const double xhat = (static_cast<double>(x[i]) - static_cast<double>(mean[c])) * inv_std;
      value = g - sums[c] * inv_rows - xhat * sums[channels + c] * inv_rows;
    }
    grad_x[i] = static_cast<T>(scale * inv_std * value);
  }
}

unsigned channel_tiles(int64_t channels) {
  return static_cast<unsigned>((channels + kTile - 1) / kTile);
}

}  // namespace

void batch_norm_statistics(DType dtype, const void* x, void* mean, void* variance, int64_t rows,
                           int64_t channels, Stream stream) {
  if (channels == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    statistics_kernel<T><<<channel_tiles(channels), dim3(kTile, kLanes), 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(mean), static_cast<T*>(variance), rows, channels);
  });
  EST_CUDA_LAUNCHED();
}

void batch_norm_forward(DType dtype, const void* x, const void* gamma, const void* beta,
                        const void* mean, const void* variance, double epsilon, void* y,
                        int64_t rows, int64_t channels, Stream stream) {
  const int64_t n = rows * channels;
  if (n == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<const T*>(mean), static_cast<const T*>(variance), epsilon, static_cast<T*>(y),
        n, channels);
  });
  EST_CUDA_LAUNCHED();
}

void batch_norm_gradient_sums(DType dtype, const void* x, const void* mean, const void* variance,
                              const void* grad, double epsilon, double* sums, void* grad_gamma,
                              void* grad_beta, int64_t rows, int64_t channels, Stream stream) {
  if (channels == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    gradient_sums_kernel<T><<<channel_tiles(channels), dim3(kTile, kLanes), 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(mean), static_cast<const T*>(variance),
        static_cast<const T*>(grad), epsilon, sums, static_cast<T*>(grad_gamma),
        static_cast<T*>(grad_beta), rows, channels);
  });
  EST_CUDA_LAUNCHED();
}

void batch_norm_grad_x(DType dtype, const void* x, const void* gamma, const void* mean,
                       const void* variance, const void* grad, const double* sums, double epsilon,
                       bool training, void* grad_x, int64_t rows, int64_t channels, Stream stream) {
  const int64_t n = rows * channels;
  if (n == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    grad_x_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(mean),
        static_cast<const T*>(variance), static_cast<const T*>(grad), sums, epsilon, training,
        static_cast<T*>(grad_x), n, rows, channels);
  });
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
