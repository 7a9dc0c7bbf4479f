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

// out [n, out_h, out_w, c] from in [n, in_h, in_w, c]: the top-left corner they share copied,
// zero where the output reaches past the input. Padding at the bottom and right when the output
// is the larger, cropping it off when the input is.
template <class T>
__global__ void corner_copy_kernel(const T* in, T* out, int64_t n, int64_t in_h, int64_t in_w,
                                   int64_t out_h, int64_t out_w, int64_t c) {
  const int64_t total = n * out_h * out_w * c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [image, y, x, ch] = nhwc_position(i, out_h, out_w, c);
    out[i] = y < in_h && x < in_w ? in[nhwc_index(image, y, x, ch, in_h, in_w, c)] : T(0);
  }
}

// corner_copy_kernel on a floating dtype.
void corner_copy(DType dtype, const void* in, void* out, int64_t n, int64_t in_h, int64_t in_w,
                 int64_t out_h, int64_t out_w, int64_t c, Stream stream) {
  launch_floating(dtype, n * out_h * out_w * c, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    corner_copy_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, in_h, in_w, out_h, out_w, c);
  });
}

}  // namespace

void transpose_2d(DType dtype, const void* in, void* out, int64_t rows, int64_t cols,
                  Stream stream) {
  const int64_t n = rows * cols;
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    transpose_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(in),
                                                                  static_cast<T*>(out), rows, cols);
  });
}

void pad_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                      int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  corner_copy(dtype, in, out, n, h, w, h + extra_h, w + extra_w, c, stream);
}

void crop_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t extra_h, int64_t extra_w, Stream stream) {
  corner_copy(dtype, in, out, n, h + extra_h, w + extra_w, h, w, c, stream);
}

}  // namespace est::ops::cuda
