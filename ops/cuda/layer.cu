// CUDA kernels around the GEMM of a dense layer: the fused bias and activation applied to the
// product in place, and the activation's gradient from its output (as ops/cpu/bias_activation).
#include "ops/cuda/device_common.cuh"

namespace est::ops::cuda {
namespace {

template <class T>
__device__ T activate(Activation activation, T v) {
  switch (activation) {
    case Activation::kNone: return v;
    case Activation::kRelu: return v > T(0) ? v : T(0);
    case Activation::kSigmoid: return T(1) / (T(1) + exp_of(-v));
    case Activation::kTanh: return tanh_of(v);
  }
  return v;
}

template <class T>
__device__ T activation_derivative(Activation activation, T dy, T y) {
  switch (activation) {
    case Activation::kNone: return dy;
    case Activation::kRelu: return y > T(0) ? dy : T(0);
    case Activation::kSigmoid: return dy * y * (T(1) - y);
    case Activation::kTanh: return dy * (T(1) - y * y);
  }
  return dy;
}

template <class T>
__global__ void bias_activation_kernel(T* x, const T* bias, Activation activation, int64_t n,
                                       int64_t channels) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const T v = bias != nullptr ? x[i] + bias[i % channels] : x[i];
    x[i] = activate(activation, v);
  }
}

template <class T>
__global__ void activation_gradient_kernel(const T* dy, const T* y, T* dx, Activation activation,
                                           int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) dx[i] = activation_derivative(activation, dy[i], y[i]);
}

}  // namespace

void bias_activation(DType dtype, void* x, const void* bias, Activation activation, int64_t rows,
                     int64_t channels, Stream stream) {
  const int64_t n = rows * channels;
  if (n == 0 || (bias == nullptr && activation == Activation::kNone)) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    bias_activation_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(x), static_cast<const T*>(bias), activation, n, channels);
  });
  EST_CUDA_LAUNCHED();
}

void activation_gradient(DType dtype, const void* grad, const void* y, void* dx,
                         Activation activation, int64_t n, Stream stream) {
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    activation_gradient_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(grad), static_cast<const T*>(y), static_cast<T*>(dx), activation,
        n);
  });
}

}  // namespace est::ops::cuda
