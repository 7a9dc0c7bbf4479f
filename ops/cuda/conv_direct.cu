// Convolution by direct summation (NHWC input, HWIO kernel, TensorFlow's window with its own
// asymmetric padding and dilation): what ops/cuda/conv.cpp runs when cuDNN offers no algorithm
// for a shape or dtype (or declines one at run time), so that no case is left without a GPU
// kernel. One thread per output element of each direction, sums in double; slow for large
// shapes, never chosen over a cuDNN algorithm.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nhwc_index.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

template <class T>
__global__ void forward_kernel(const T* in, const T* kernel, T* out, WindowGeometry g) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.out_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [n, oh, ow, oc] = nhwc_position(i, g.out_h, g.out_w, g.out_c);
    double sum = 0.0;
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) continue;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_w) continue;
        const T* x = in + nhwc_index(n, ih, iw, 0, g.in_h, g.in_w, g.in_c);
        const T* k = kernel + nhwc_index(kh, kw, 0, oc, g.kernel_w, g.in_c, g.out_c);
        for (int64_t c = 0; c < g.in_c; ++c)
          sum += static_cast<double>(x[c]) * static_cast<double>(k[c * g.out_c]);
      }
    }
    out[i] = static_cast<T>(sum);
  }
}

// The output position along one dimension whose window reads input index `i` at kernel tap
// `k`, or -1.
__device__ inline int64_t source_of(int64_t i, int64_t k, int64_t pad, int64_t stride,
                                    int64_t dilation, int64_t outputs) {
  const int64_t t = i + pad - k * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < outputs ? o : -1;
}

template <class T>
__global__ void backward_data_kernel(const T* grad, const T* kernel, T* grad_input,
                                     WindowGeometry g) {
  const int64_t total = g.batch * g.in_h * g.in_w * g.in_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [n, ih, iw, c] = nhwc_position(i, g.in_h, g.in_w, g.in_c);
    double sum = 0.0;
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t oh = source_of(ih, kh, g.pad_top, g.stride_h, g.dilation_h, g.out_h);
      if (oh < 0) continue;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t ow = source_of(iw, kw, g.pad_left, g.stride_w, g.dilation_w, g.out_w);
        if (ow < 0) continue;
        const T* dy = grad + nhwc_index(n, oh, ow, 0, g.out_h, g.out_w, g.out_c);
        const T* k = kernel + nhwc_index(kh, kw, c, 0, g.kernel_w, g.in_c, g.out_c);
        for (int64_t oc = 0; oc < g.out_c; ++oc)
          sum += static_cast<double>(dy[oc]) * static_cast<double>(k[oc]);
      }
    }
    grad_input[i] = static_cast<T>(sum);
  }
}

template <class T>
__global__ void backward_filter_kernel(const T* in, const T* grad, T* grad_kernel,
                                       WindowGeometry g) {
  const int64_t total = g.kernel_h * g.kernel_w * g.in_c * g.out_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [kh, kw, c, oc] = nhwc_position(i, g.kernel_w, g.in_c, g.out_c);  // HWIO
    double sum = 0.0;
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
          if (iw < 0 || iw >= g.in_w) continue;
          sum += static_cast<double>(in[nhwc_index(n, ih, iw, c, g.in_h, g.in_w, g.in_c)]) *
                 static_cast<double>(grad[nhwc_index(n, oh, ow, oc, g.out_h, g.out_w, g.out_c)]);
        }
      }
    grad_kernel[i] = static_cast<T>(sum);
  }
}

}  // namespace

void conv_direct_forward(DType dtype, const void* in, const void* kernel, void* out,
                         const WindowGeometry& g, Stream stream) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.out_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    forward_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<const T*>(kernel), static_cast<T*>(out), g);
  });
}

void conv_direct_backward_data(DType dtype, const void* grad, const void* kernel, void* grad_input,
                               const WindowGeometry& g, Stream stream) {
  const int64_t total = g.batch * g.in_h * g.in_w * g.in_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    backward_data_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(grad), static_cast<const T*>(kernel), static_cast<T*>(grad_input), g);
  });
}

void conv_direct_backward_filter(DType dtype, const void* in, const void* grad, void* grad_kernel,
                                 const WindowGeometry& g, Stream stream) {
  const int64_t total = g.kernel_h * g.kernel_w * g.in_c * g.out_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    backward_filter_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<const T*>(grad), static_cast<T*>(grad_kernel), g);
  });
}

}  // namespace est::ops::cuda
