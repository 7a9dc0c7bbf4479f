// Batch normalization over x [rows, C] (channels fastest: NHWC images and [N, C] activations
// alike), with ops/cpu/batch_norm_reference's arithmetic: per-channel sums in double, the
// variance in a second pass around the mean and biased (divided by rows), any epsilon >= 0,
// gamma and beta optional, and a gradient for fixed (inference) statistics too. cuDNN's batch
// norm expresses none of the last four (its epsilon must be >= CUDNN_BN_MIN_EPSILON, its running
// variance is Bessel-corrected, scale and bias are required, backward assumes batch statistics),
// so these are plain kernels. Per-channel sums: blocks of 32 channels x up to 4096 rows,
// threadIdx.x the channel (coalesced reads of a row), threadIdx.y a lane of rows, reduced in
// shared memory into one partial sum per block, then the blocks' partials are added in order
// (deterministic) by one thread per channel.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

constexpr int kTile = 32;                // channels per block
constexpr int kLanes = 16;               // row lanes per block (a power of two)
constexpr int64_t kRowsPerBlock = 4096;  // rows a block sums before more blocks share them
constexpr int64_t kMaxRowBlocks = 1024;

// What a partial-sum pass adds up per row and channel.
enum class Pass { kSum, kSquares, kGradient };

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

// Block (tile, b) sums rows [b * per_block, (b + 1) * per_block) of its 32 channels into
// first[b * C + c] (and second[b * C + c] for the gradient):
//   kSum: x;  kSquares: (x - center[c])^2;  kGradient: dy and dy * (x - mean) * inv_std.
template <class T, Pass kPass>
__global__ void partial_kernel(const T* x, const T* grad, const T* mean, const T* variance,
                               const double* center, double epsilon, double* first, double* second,
                               int64_t rows, int64_t channels, int64_t per_block) {
  __shared__ double shared[kLanes][kTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool active = c < channels;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_block;
  const int64_t end = begin + per_block < rows ? begin + per_block : rows;
  double a = 0.0, b = 0.0;
  if (active) {
    double m = 0.0, inv_std = 0.0;
    if constexpr (kPass == Pass::kSquares) m = center[c];
    if constexpr (kPass == Pass::kGradient) {
      m = static_cast<double>(mean[c]);
      inv_std = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    }
    for (int64_t r = begin + threadIdx.y; r < end; r += kLanes) {
      const double v = static_cast<double>(x[r * channels + c]);
      if constexpr (kPass == Pass::kSum) {
        a += v;
      } else if constexpr (kPass == Pass::kSquares) {
        a += (v - m) * (v - m);
      } else {
        const double g = static_cast<double>(grad[r * channels + c]);
        a += g;
        b += g * ((v - m) * inv_std);
      }
    }
  }
  a = lane_sum(shared, a);
  if constexpr (kPass == Pass::kGradient) b = lane_sum(shared, b);
  if (active && threadIdx.y == 0) {
    first[static_cast<int64_t>(blockIdx.y) * channels + c] = a;
    if constexpr (kPass == Pass::kGradient)
      second[static_cast<int64_t>(blockIdx.y) * channels + c] = b;
  }
}

// total[c] = the sum over blocks of partial[b * C + c], in block order (deterministic).
__device__ double blocks_total(const double* partial, int64_t blocks, int64_t channels, int64_t c) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b * channels + c];
  return total;
}

// The mean from the sums: in double for the squares pass, and in the dtype.
template <class T>
__global__ void mean_kernel(const double* partial, int64_t blocks, int64_t rows, int64_t channels,
                            double* center, T* mean) {
  EST_GRID_STRIDE_LOOP(c, channels) {
    const double m =
        blocks_total(partial, blocks, channels, c) / static_cast<double>(rows > 1 ? rows : 1);
    center[c] = m;
    mean[c] = static_cast<T>(m);
  }
}

template <class T>
__global__ void variance_kernel(const double* partial, int64_t blocks, int64_t rows,
                                int64_t channels, T* variance) {
  EST_GRID_STRIDE_LOOP(c, channels) {
    variance[c] = static_cast<T>(blocks_total(partial, blocks, channels, c) /
                                 static_cast<double>(rows > 1 ? rows : 1));
  }
}

template <class T>
__global__ void gradient_totals_kernel(const double* partial_dy, const double* partial_dy_xhat,
                                       int64_t blocks, int64_t channels, double* sums,
                                       T* grad_gamma, T* grad_beta) {
  EST_GRID_STRIDE_LOOP(c, channels) {
    const double sum_dy = blocks_total(partial_dy, blocks, channels, c);
    const double sum_dy_xhat = blocks_total(partial_dy_xhat, blocks, channels, c);
    sums[c] = sum_dy;
    sums[channels + c] = sum_dy_xhat;
    if (grad_gamma != nullptr) grad_gamma[c] = static_cast<T>(sum_dy_xhat);
    if (grad_beta != nullptr) grad_beta[c] = static_cast<T>(sum_dy);
  }
}

template <class T>
__global__ void forward_kernel(const T* x, const T* gamma, const T* beta, const T* mean,
                               const T* variance, double epsilon, T* y, int64_t n,
                               int64_t channels) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % channels;
    const double inv_std = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    const double normalized = (static_cast<double>(x[i]) - static_cast<double>(mean[c])) * inv_std;
    const double scale = gamma != nullptr ? static_cast<double>(gamma[c]) : 1.0;
    const double shift = beta != nullptr ? static_cast<double>(beta[c]) : 0.0;
    y[i] = static_cast<T>(normalized * scale + shift);
  }
}

template <class T>
__global__ void grad_x_kernel(const T* x, const T* gamma, const T* mean, const T* variance,
                              const T* grad, const double* sums, double epsilon, bool training,
                              T* grad_x, int64_t n, int64_t rows, int64_t channels) {
  const double inv_rows = 1.0 / static_cast<double>(rows > 1 ? rows : 1);
  EST_GRID_STRIDE_LOOP(i, n) {
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

// Blocks of rows per tile of channels: enough to fill the GPU when the channels are few.
int64_t row_blocks(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return blocks < 1 ? 1 : (blocks > kMaxRowBlocks ? kMaxRowBlocks : blocks);
}

dim3 partial_grid(int64_t rows, int64_t channels) {
  return dim3(static_cast<unsigned>((channels + kTile - 1) / kTile),
              static_cast<unsigned>(row_blocks(rows)));
}

int64_t rows_per_block(int64_t rows) {
  const int64_t blocks = row_blocks(rows);
  return (rows + blocks - 1) / blocks;
}

}  // namespace

int64_t batch_norm_scratch_size(int64_t rows, int64_t channels) {
  return 2 * row_blocks(rows) * channels + channels;
}

void batch_norm_statistics(DType dtype, const void* x, void* mean, void* variance, double* scratch,
                           int64_t rows, int64_t channels, Stream stream) {
  if (channels == 0) return;
  const int64_t blocks = row_blocks(rows), per_block = rows_per_block(rows);
  double* partial = scratch;
  double* center = scratch + 2 * blocks * channels;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    partial_kernel<T, Pass::kSum>
        <<<partial_grid(rows, channels), dim3(kTile, kLanes), 0, as_stream(stream)>>>(
            px, nullptr, nullptr, nullptr, nullptr, 0.0, partial, nullptr, rows, channels,
            per_block);
    EST_CUDA_LAUNCHED();
    mean_kernel<T><<<blocks_for(channels), kThreads, 0, as_stream(stream)>>>(
        partial, blocks, rows, channels, center, static_cast<T*>(mean));
    EST_CUDA_LAUNCHED();
    partial_kernel<T, Pass::kSquares>
        <<<partial_grid(rows, channels), dim3(kTile, kLanes), 0, as_stream(stream)>>>(
            px, nullptr, nullptr, nullptr, center, 0.0, partial, nullptr, rows, channels,
            per_block);
    EST_CUDA_LAUNCHED();
    variance_kernel<T><<<blocks_for(channels), kThreads, 0, as_stream(stream)>>>(
        partial, blocks, rows, channels, static_cast<T*>(variance));
  });
  EST_CUDA_LAUNCHED();
}

void batch_norm_forward(DType dtype, const void* x, const void* gamma, const void* beta,
                        const void* mean, const void* variance, double epsilon, void* y,
                        int64_t rows, int64_t channels, Stream stream) {
  const int64_t n = rows * channels;
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    forward_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<const T*>(mean), static_cast<const T*>(variance), epsilon, static_cast<T*>(y),
        n, channels);
  });
}

void batch_norm_gradient_sums(DType dtype, const void* x, const void* mean, const void* variance,
                              const void* grad, double epsilon, double* scratch, double* sums,
                              void* grad_gamma, void* grad_beta, int64_t rows, int64_t channels,
                              Stream stream) {
  if (channels == 0) return;
  const int64_t blocks = row_blocks(rows), per_block = rows_per_block(rows);
  double* partial_dy = scratch;
  double* partial_dy_xhat = scratch + blocks * channels;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    partial_kernel<T, Pass::kGradient>
        <<<partial_grid(rows, channels), dim3(kTile, kLanes), 0, as_stream(stream)>>>(
            static_cast<const T*>(x), static_cast<const T*>(grad), static_cast<const T*>(mean),
            static_cast<const T*>(variance), nullptr, epsilon, partial_dy, partial_dy_xhat, rows,
            channels, per_block);
    EST_CUDA_LAUNCHED();
    gradient_totals_kernel<T><<<blocks_for(channels), kThreads, 0, as_stream(stream)>>>(
        partial_dy, partial_dy_xhat, blocks, channels, sums, static_cast<T*>(grad_gamma),
        static_cast<T*>(grad_beta));
  });
  EST_CUDA_LAUNCHED();
}

void batch_norm_grad_x(DType dtype, const void* x, const void* gamma, const void* mean,
                       const void* variance, const void* grad, const double* sums, double epsilon,
                       bool training, void* grad_x, int64_t rows, int64_t channels, Stream stream) {
  const int64_t n = rows * channels;
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    grad_x_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(mean),
        static_cast<const T*>(variance), static_cast<const T*>(grad), sums, epsilon, training,
        static_cast<T*>(grad_x), n, rows, channels);
  });
}

}  // namespace est::ops::cuda
