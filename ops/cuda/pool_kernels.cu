// 2-D max and average pooling over NHWC data, with exactly ops/cpu/pool_reference's rules:
// TensorFlow's asymmetric SAME windows (the window's in-bounds part only), average pooling
// dividing by the in-bounds count, max pooling ignoring NaNs and sending the gradient to the
// first maximum of a window in row-major order. cuDNN pools with symmetric padding and does not
// document which of equal maxima gets the gradient, so these are plain kernels (TensorFlow's
// own GPU max-pool gradient, tensorflow/core/kernels/maxpooling_op_gpu.cu.cc, likewise works
// from argmax positions). Forward: one thread per output element; backward: one thread per
// input element, gathering over the windows that contain it (no atomics, deterministic).
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/nhwc_index.cuh"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {
namespace {

struct Span {
  int64_t h0, h1, w0, w1;
};

__device__ inline Span window_span(const WindowGeometry& g, int64_t oh, int64_t ow) {
  const int64_t h = oh * g.stride_h - g.pad_top, x = ow * g.stride_w - g.pad_left;
  return {h < 0 ? 0 : h, h + g.kernel_h < g.in_h ? h + g.kernel_h : g.in_h, x < 0 ? 0 : x,
          x + g.kernel_w < g.in_w ? x + g.kernel_w : g.in_w};
}

// The output rows (or columns) whose windows contain input row `h`: [*begin, *end).
__device__ inline void covering(int64_t h, int64_t pad, int64_t kernel, int64_t stride,
                                int64_t outputs, int64_t* begin, int64_t* end) {
  const int64_t low = h + pad - kernel + 1;  // the first window start that still reaches h
  *begin = low <= 0 ? 0 : (low + stride - 1) / stride;
  const int64_t last = (h + pad) / stride + 1;
  *end = last < outputs ? last : outputs;
}

template <class T>
__global__ void max_forward_kernel(const T* in, T* out, int64_t* argmax, WindowGeometry g) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.in_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [n, oh, ow, c] = nhwc_position(i, g.out_h, g.out_w, g.in_c);
    const Span s = window_span(g, oh, ow);
    const T* image = in + nhwc_index(n, 0, 0, c, g.in_h, g.in_w, g.in_c);
    T best = -INFINITY;
    int64_t best_at = -1;
    for (int64_t h = s.h0; h < s.h1; ++h)
      for (int64_t x = s.w0; x < s.w1; ++x) {
        const T v = image[(h * g.in_w + x) * g.in_c];
        // std::max(best, v) keeps best unless best < v (a NaN never wins); the first position
        // equal to the final maximum is where it was first reached.
        if (best < v || (best_at < 0 && v == best)) {
          best = v;
          best_at = h * g.in_w + x;
        }
      }
    out[i] = best;
    if (argmax != nullptr) argmax[i] = best_at;
  }
}

template <class T>
__global__ void avg_forward_kernel(const T* in, T* out, WindowGeometry g) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.in_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [n, oh, ow, c] = nhwc_position(i, g.out_h, g.out_w, g.in_c);
    const Span s = window_span(g, oh, ow);
    const T* image = in + nhwc_index(n, 0, 0, c, g.in_h, g.in_w, g.in_c);
    T sum = T(0);
    for (int64_t h = s.h0; h < s.h1; ++h)
      for (int64_t x = s.w0; x < s.w1; ++x) sum += image[(h * g.in_w + x) * g.in_c];
    out[i] = sum * (T(1) / static_cast<T>((s.h1 - s.h0) * (s.w1 - s.w0)));
  }
}

// kMax: grad goes where argmax names this element; otherwise each window's share.
template <class T, bool kMax>
__global__ void backward_kernel(const T* grad, const int64_t* argmax, T* grad_input,
                                WindowGeometry g) {
  const int64_t total = g.batch * g.in_h * g.in_w * g.in_c;
  EST_GRID_STRIDE_LOOP(i, total) {
    const auto [n, h, x, c] = nhwc_position(i, g.in_h, g.in_w, g.in_c);
    int64_t oh0, oh1, ow0, ow1;
    covering(h, g.pad_top, g.kernel_h, g.stride_h, g.out_h, &oh0, &oh1);
    covering(x, g.pad_left, g.kernel_w, g.stride_w, g.out_w, &ow0, &ow1);
    const int64_t position = h * g.in_w + x;
    T sum = T(0);
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = nhwc_index(n, oh, ow, c, g.out_h, g.out_w, g.in_c);
        if constexpr (kMax) {
          if (argmax[o] == position) sum += grad[o];
        } else {
          const Span s = window_span(g, oh, ow);
          sum += grad[o] * (T(1) / static_cast<T>((s.h1 - s.h0) * (s.w1 - s.w0)));
        }
      }
    grad_input[i] = sum;
  }
}

}  // namespace

void max_pool_forward(DType dtype, const void* in, void* out, int64_t* argmax,
                      const WindowGeometry& g, Stream stream) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.in_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    max_forward_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), argmax, g);
  });
}

void avg_pool_forward(DType dtype, const void* in, void* out, const WindowGeometry& g,
                      Stream stream) {
  const int64_t total = g.batch * g.out_h * g.out_w * g.in_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    avg_forward_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(in),
                                                                    static_cast<T*>(out), g);
  });
}

void max_pool_backward(DType dtype, const void* grad, const int64_t* argmax, void* grad_input,
                       const WindowGeometry& g, Stream stream) {
  const int64_t total = g.batch * g.in_h * g.in_w * g.in_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    backward_kernel<T, true><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(grad), argmax, static_cast<T*>(grad_input), g);
  });
}

void avg_pool_backward(DType dtype, const void* grad, void* grad_input, const WindowGeometry& g,
                       Stream stream) {
  const int64_t total = g.batch * g.in_h * g.in_w * g.in_c;
  launch_floating(dtype, total, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    backward_kernel<T, false><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(grad), nullptr, static_cast<T*>(grad_input), g);
  });
}

}  // namespace est::ops::cuda
