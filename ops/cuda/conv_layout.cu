// Layout kernels around cuDNN's convolutions: the HWIO <-> KRSC kernel transpose (cuDNN has no
// HWIO filter format) and the extra bottom/right zero padding of TensorFlow's asymmetric SAME
// windows (cuDNN pads both sides equally). Plain grid-stride loops over the output.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

template <class T>
__global__ void transpose_kernel(const T* in, T* out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t c = i / rows, r = i % rows;  // out[c, r]
    out[i] = in[r * cols + c];
  }
}

// Every element of the padded image: the input's where it has one, zero in the extra margin.
template <class T>
__global__ void pad_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t padded_h, int64_t padded_w) {
  const int64_t total = n * padded_h * padded_w * c;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ch = i % c;
    const int64_t x = (i / c) % padded_w;
    const int64_t y = (i / (c * padded_w)) % padded_h;
    const int64_t image = i / (c * padded_w * padded_h);
    out[i] = y < h && x < w ? in[((image * h + y) * w + x) * c + ch] : T(0);
  }
}

template <class T>
__global__ void crop_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                            int64_t padded_h, int64_t padded_w) {
  const int64_t total = n * h * w * c;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ch = i % c;
    const int64_t x = (i / c) % w;
    const int64_t y = (i / (c * w)) % h;
    const int64_t image = i / (c * w * h);
    out[i] = in[((image * padded_h + y) * padded_w + x) * c + ch];
  }
}

}  // namespace

void transpose_2d(DType dtype, const void* in, void* out, int64_t rows, int64_t cols,
                  Stream stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    transpose_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), rows, cols);
  });
  EST_CUDA_LAUNCHED();
}

void pad_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                      int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  const int64_t total = n * (h + extra_h) * (w + extra_w) * c;
  if (total == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    pad_kernel<T><<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, h, w, c, h + extra_h, w + extra_w);
  });
  EST_CUDA_LAUNCHED();
}

void crop_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  const int64_t total = n * h * w * c;
  if (total == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    crop_kernel<T><<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, h, w, c, h + extra_h, w + extra_w);
  });
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
