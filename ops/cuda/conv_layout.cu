// Layout kernels around cuDNN's convolutions: the HWIO <-> KRSC kernel transpose (cuDNN has no
// HWIO filter format) and the extra bottom/right zero padding of TensorFlow's asymmetric SAME
// windows (cuDNN pads both sides equally). Plain grid-stride loops over the output.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nhwc_index.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

template <class T>
__global__ void transpose_kernel(const T* in, T* out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  EST_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i / rows, r = i % rows;  // out[c, r]
    out[i] = in[r * cols + c];
  }
}

// Every element of the padded image: the input's where it has one, zero in the extra margin.
template <class T>
__global__ void pad_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t padded_h, int64_t padded_w) {
  const int64_t total = n * padded_h * padded_w * c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [image, y, x, ch] = nhwc_position(i, padded_h, padded_w, c);
    out[i] = y < h && x < w ? in[nhwc_index(image, y, x, ch, h, w, c)] : T(0);
  }
}

template <class T>
__global__ void crop_kernel(const T* in, T* out, int64_t n, int64_t h, int64_t w, int64_t c,
                            int64_t padded_h, int64_t padded_w) {
  const int64_t total = n * h * w * c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [image, y, x, ch] = nhwc_position(i, h, w, c);
    out[i] = in[nhwc_index(image, y, x, ch, padded_h, padded_w, c)];
  }
}

}  // namespace

void transpose_2d(DType dtype, const void* in, void* out, int64_t rows, int64_t cols,
                  Stream stream) {
  const int64_t n = rows * cols;
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    transpose_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), rows, cols);
  });
}

void pad_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                      int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  const int64_t total = n * (h + extra_h) * (w + extra_w) * c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    pad_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, h, w, c, h + extra_h, w + extra_w);
  });
}

void crop_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  const int64_t total = n * h * w * c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    crop_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, h, w, c, h + extra_h, w + extra_w);
  });
}

}  // namespace est::ops::cuda
