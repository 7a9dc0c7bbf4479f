// CUDA elementwise kernels: fill, cast, the broadcasting binary ops and their gradients,
// comparisons, broadcast copies, the unary ops and their gradients, and the optimizers' update.
// bfloat16 has its own fill, cast and broadcast copy here; its arithmetic runs in float32
// through the registry's adapter (ops/cuda/register.cpp, ops/cpu/via_float.h).
// One kernel per dtype for each family; the op is a kernel argument switched on per element
// (the same for the whole grid, so no warp diverges). The formulas are the reference kernels'
// (ops/cpu/elementwise_kernels.cpp, unary_kernels.cpp), which the op harness compares against.
#include "ops/cuda/device_common.cuh"

namespace est::ops::cuda {
namespace {

template <class T>
__device__ T binary_value(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::kAdd: return static_cast<T>(x + y);
    case BinaryOp::kSub: return static_cast<T>(x - y);
    case BinaryOp::kMul: return static_cast<T>(x * y);
    case BinaryOp::kDiv: return static_cast<T>(x / y);
    case BinaryOp::kMaximum: return x >= y ? x : y;
    case BinaryOp::kMinimum: return x <= y ? x : y;
    case BinaryOp::kPow: return pow_of(x, y);
    case BinaryOp::kSquaredDifference: return static_cast<T>((x - y) * (x - y));
  }
  return T(0);
}

// Ties of maximum/minimum send the gradient to a; pow's gradient to the exponent is 0 where
// the base is <= 0 (TensorFlow's choices).
template <class T>
__device__ T binary_gradient_value(BinaryOp op, int input, T g, T x, T y) {
  const bool first = input == 0;
  switch (op) {
    case BinaryOp::kAdd: return g;
    case BinaryOp::kSub: return first ? g : -g;
    case BinaryOp::kMul: return first ? g * y : g * x;
    case BinaryOp::kDiv: return first ? g / y : -g * x / (y * y);
    case BinaryOp::kMaximum: return (x >= y) == first ? g : T(0);
    case BinaryOp::kMinimum: return (x <= y) == first ? g : T(0);
    case BinaryOp::kPow:
      if (first) return g * y * pow_of(x, y - T(1));
      return x > T(0) ? g * pow_of(x, y) * log_of(x) : T(0);
    case BinaryOp::kSquaredDifference: return first ? T(2) * g * (x - y) : T(2) * g * (y - x);
  }
  return T(0);
}

template <class T>
__device__ T unary_float_value(UnaryOp op, UnaryParams p, T v) {
  switch (op) {
    case UnaryOp::kNeg: return static_cast<T>(-v);
    case UnaryOp::kExp: return exp_of(v);
    case UnaryOp::kLog: return log_of(v);
    case UnaryOp::kSqrt: return sqrt_of(v);
    case UnaryOp::kSquare: return v * v;
    case UnaryOp::kAbs: return v < T(0) ? -v : v;
    case UnaryOp::kRelu: return v > T(0) ? v : T(0);
    case UnaryOp::kSigmoid: return sigmoid_of(v);
    case UnaryOp::kTanh: return tanh_of(v);
    case UnaryOp::kClip: {
      const T low = static_cast<T>(p.a), high = static_cast<T>(p.b);
      return v < low ? low : (v > high ? high : v);
    }
    case UnaryOp::kPow:
      if (p.a == 2.0) return v * v;
      if (p.a == 0.5) return sqrt_of(v);
      return pow_of(v, static_cast<T>(p.a));
  }
  return T(0);
}

template <class T>
__device__ T unary_value(UnaryOp op, UnaryParams p, T v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(-v);  // neg is the one unary op of integer tensors
  else
    return unary_float_value(op, p, v);
}

// `s` is the saved value: the output for exp, sqrt, sigmoid and tanh, else the input.
template <class T>
__device__ T unary_gradient_value(UnaryOp op, UnaryParams p, T g, T s) {
  switch (op) {
    case UnaryOp::kNeg: return -g;
    case UnaryOp::kExp: return g * s;
    case UnaryOp::kLog: return g / s;
    case UnaryOp::kSqrt: return g / (T(2) * s);
    case UnaryOp::kSquare: return T(2) * g * s;
    case UnaryOp::kAbs: return s > T(0) ? g : (s < T(0) ? -g : T(0));
    case UnaryOp::kRelu: return s > T(0) ? g : T(0);
    case UnaryOp::kSigmoid: return g * s * (T(1) - s);
    case UnaryOp::kTanh: return g * (T(1) - s * s);
    case UnaryOp::kClip:
      return s >= static_cast<T>(p.a) && s <= static_cast<T>(p.b) ? g : T(0);
    case UnaryOp::kPow: {
      const T e = static_cast<T>(p.a);
      return g * e * pow_of(s, e - T(1));
    }
  }
  return T(0);
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  EST_GRID_STRIDE_LOOP(i, n) out[i] = value;
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* out, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) out[i] = static_cast<To>(x[i]);
}

template <class From>
__global__ void cast_to_bool_kernel(const From* x, bool* out, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) out[i] = x[i] != From(0);
}

// bfloat16 is stored as its 16 bits (uint16_t) and converted with the CPU's rounding
// (ops/dtype_bfloat16.h: nearest even, a NaN keeps its sign), so both backends give the same
// bits; cuda_bf16.h's __float2bfloat16_rn would drop a NaN's sign. Other types go through float.
__device__ inline float bfloat16_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ inline uint16_t float_to_bfloat16(float value) {
  const uint32_t u = __float_as_uint(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <class From>
__global__ void cast_to_bfloat16_kernel(const From* x, uint16_t* out, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) out[i] = float_to_bfloat16(static_cast<float>(x[i]));
}

template <class To>
__global__ void cast_from_bfloat16_kernel(const uint16_t* x, To* out, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const float v = bfloat16_to_float(x[i]);
    if constexpr (std::is_same_v<To, bool>)
      out[i] = v != 0.0f;
    else
      out[i] = static_cast<To>(v);
  }
}

template <class T>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, T* out, int64_t n,
                              Broadcast bc) {
  EST_GRID_STRIDE_LOOP(i, n) {
    out[i] = binary_value(op, a[operand_offset(bc, 0, i)], b[operand_offset(bc, 1, i)]);
  }
}

template <class T>
__global__ void binary_gradient_kernel(BinaryOp op, int input, const T* g, const T* a, const T* b,
                                       T* out, int64_t n, Broadcast bc) {
  EST_GRID_STRIDE_LOOP(i, n) {
    out[i] = binary_gradient_value(op, input, g[operand_offset(bc, 0, i)],
                                   a[operand_offset(bc, 1, i)], b[operand_offset(bc, 2, i)]);
  }
}

template <class T>
__global__ void compare_kernel(CompareOp op, const T* a, const T* b, bool* out, int64_t n,
                               Broadcast bc) {
  EST_GRID_STRIDE_LOOP(i, n) {
    const T x = a[operand_offset(bc, 0, i)], y = b[operand_offset(bc, 1, i)];
    out[i] = op == CompareOp::kEqual ? x == y : (op == CompareOp::kGreater ? x > y : x < y);
  }
}

template <class T>
__global__ void broadcast_kernel(const T* x, T* out, int64_t n, Broadcast bc) {
  EST_GRID_STRIDE_LOOP(i, n) out[i] = x[operand_offset(bc, 0, i)];
}

template <class T>
__global__ void unary_kernel(UnaryOp op, UnaryParams p, const T* x, T* y, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) y[i] = unary_value(op, p, x[i]);
}

template <class T>
__global__ void unary_gradient_kernel(UnaryOp op, UnaryParams p, const T* g, const T* s, T* dx,
                                      int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) dx[i] = unary_gradient_value(op, p, g[i], s[i]);
}

template <class T>
__global__ void add_scaled_kernel(T* target, const T* x, T alpha, int64_t n) {
  EST_GRID_STRIDE_LOOP(i, n) target[i] = target[i] + x[i] * alpha;
}

}  // namespace

void fill(DType dtype, void* out, int64_t n, double value, Stream stream) {
  if (n == 0) return;
  if (dtype == DType::kBF16) {
    fill_kernel<uint16_t><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<uint16_t*>(out), n, bfloat16(value).bits);
    EST_CUDA_LAUNCHED();
    return;
  }
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<T*>(out), n,
                                                                        static_cast<T>(value));
  });
  EST_CUDA_LAUNCHED();
}

void cast(DType from, DType to, const void* x, void* out, int64_t n, Stream stream) {
  if (n == 0) return;
  if (from == DType::kBF16 && to == DType::kBF16) {
    EST_CUDA_CHECK(cudaMemcpyAsync(out, x, static_cast<size_t>(n) * 2, cudaMemcpyDeviceToDevice,
                                   as_stream(stream)));
    return;
  }
  if (from == DType::kBF16) {
    dispatch_numeric(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      cast_from_bfloat16_kernel<To><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const uint16_t*>(x), static_cast<To*>(out), n);
    });
    EST_CUDA_LAUNCHED();
    return;
  }
  if (to == DType::kBF16) {
    dispatch_numeric(from, [&](auto from_tag) {
      using From = decltype(from_tag);
      cast_to_bfloat16_kernel<From><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          static_cast<const From*>(x), static_cast<uint16_t*>(out), n);
    });
    EST_CUDA_LAUNCHED();
    return;
  }
  dispatch_numeric(from, [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_numeric(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      if constexpr (std::is_same_v<To, bool>)
        cast_to_bool_kernel<From><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
            static_cast<const From*>(x), static_cast<bool*>(out), n);
      else
        cast_kernel<From, To><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
            static_cast<const From*>(x), static_cast<To*>(out), n);
    });
  });
  EST_CUDA_LAUNCHED();
}

void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, int64_t n,
            const Broadcast& broadcast, Stream stream) {
  if (n == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      binary_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
          op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n,
          broadcast);
  });
  EST_CUDA_LAUNCHED();
}

void binary_gradient(BinaryOp op, int input, DType dtype, const void* grad, const void* a,
                     const void* b, void* out, int64_t n, const Broadcast& broadcast,
                     Stream stream) {
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    binary_gradient_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        op, input, static_cast<const T*>(grad), static_cast<const T*>(a),
        static_cast<const T*>(b), static_cast<T*>(out), n, broadcast);
  });
}

void compare(CompareOp op, DType dtype, const void* a, const void* b, bool* out, int64_t n,
             const Broadcast& broadcast, Stream stream) {
  if (n == 0) return;
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    compare_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        op, static_cast<const T*>(a), static_cast<const T*>(b), out, n, broadcast);
  });
  EST_CUDA_LAUNCHED();
}

void broadcast_copy(DType dtype, const void* x, void* out, int64_t n, const Broadcast& broadcast,
                    Stream stream) {
  if (n == 0) return;
  if (dtype == DType::kBF16) {  // a copy of 16-bit patterns
    broadcast_kernel<uint16_t><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), n, broadcast);
    EST_CUDA_LAUNCHED();
    return;
  }
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcast_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(out), n, broadcast);
  });
  EST_CUDA_LAUNCHED();
}

void unary(UnaryOp op, UnaryParams params, DType dtype, const void* x, void* y, int64_t n,
           Stream stream) {
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        op, params, static_cast<const T*>(x), static_cast<T*>(y), n);
  };
  if (dtype == DType::kI32)
    launch(int32_t{});  // neg only
  else if (dtype == DType::kI64)
    launch(int64_t{});
  else
    dispatch_floating(dtype, launch);
  EST_CUDA_LAUNCHED();
}

void unary_gradient(UnaryOp op, UnaryParams params, DType dtype, const void* grad,
                    const void* saved, void* dx, int64_t n, Stream stream) {
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    unary_gradient_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        op, params, static_cast<const T*>(grad), static_cast<const T*>(saved),
        static_cast<T*>(dx), n);
  });
}

void add_scaled(DType dtype, void* target, const void* x, double alpha, int64_t n, Stream stream) {
  launch_floating(dtype, n, [&](auto tag, unsigned grid) {
    using T = decltype(tag);
    add_scaled_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(target), static_cast<const T*>(x), static_cast<T>(alpha), n);
  });
}

}  // namespace est::ops::cuda
