// Reference kernels for fill, copy, cast, the broadcasting binary ops and their gradients,
// comparisons, the optimizers' fused update and broadcast_to (see cpu/kernels.h).
//
// Each family switches on its enum once, outside the loop, and hands one lambda to the loops of
// cpu/elementwise.h, so every (op, dtype) pair is its own vectorised loop. A binary gradient is
// computed with every operand broadcast to the upstream gradient's shape; the op sums it back
// to its input's shape.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "ops/cpu/checks.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

namespace est::ops::cpu {
namespace {

// target[i] += x[i] * alpha over [begin, end): the optimizers' update loop, one copy per
// instruction set (cpu/isa.h).
EST_MULTIVERSION void add_scaled_f32(float* target, const float* x, float alpha, int64_t begin,
                                     int64_t end) {
  for (int64_t i = begin; i < end; ++i) target[i] = target[i] + x[i] * alpha;
}

template <class T, class Op>
void binary_typed(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  binary_map(a.data<T>(), a.shape(), b.data<T>(), b.shape(), out.data<T>(), out.shape(),
             [op](T x, T y) { return static_cast<T>(op(x, y)); });
}

template <class T, class Op>
void gradient_typed(const Tensor& grad, const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  ternary_map(grad.data<T>(), grad.shape(), a.data<T>(), a.shape(), b.data<T>(), b.shape(),
              out.data<T>(), grad.shape(),
              [op](T g, T x, T y) { return static_cast<T>(op(g, x, y)); });
}

}  // namespace

void fill(Tensor& out, double value) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(out.raw_data());
    const T v = static_cast<T>(value);
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) data[i] = v;
  });
}

void copy(const Tensor& source, Tensor& target) {
  if (source.raw_data() != target.raw_data())
    std::memcpy(target.raw_data(), source.raw_data(), source.nbytes());
}

void cast(const Tensor& x, Tensor& out) {
  dispatch_dtype(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_dtype(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* in = x.data<From>();
      To* result = out.data<To>();
      parallel_for(x.numel(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          if constexpr (std::is_same_v<To, bool>)
            result[i] = in[i] != From(0);
          else
            result[i] = static_cast<To>(in[i]);
        }
      });
    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_numeric(a.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case BinaryOp::kAdd:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x + y; });
      case BinaryOp::kSub:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x - y; });
      case BinaryOp::kMul:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x * y; });
      case BinaryOp::kDiv:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x / y; });
      case BinaryOp::kMaximum:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x >= y ? x : y; });
      case BinaryOp::kMinimum:
        return binary_typed<T>(a, b, out, [](T x, T y) { return x <= y ? x : y; });
      case BinaryOp::kPow:
        return binary_typed<T>(a, b, out, [](T x, T y) { return std::pow(x, y); });
      case BinaryOp::kSquaredDifference:
        return binary_typed<T>(a, b, out, [](T x, T y) { return (x - y) * (x - y); });
    }
  });
}

// Ties of maximum/minimum send the gradient to `a`, as TensorFlow does; pow's gradient to the
// exponent uses log(base), taken as 0 where base <= 0 (as TensorFlow does).
void binary_gradient(BinaryOp op, int input, const Tensor& grad, const Tensor& a, const Tensor& b,
                     Tensor& out) {
  dispatch_float(grad.dtype(), "binary_gradient", [&](auto tag) {
    using T = decltype(tag);
    const bool first = input == 0;
    auto run = [&](auto fn) { gradient_typed<T>(grad, a, b, out, fn); };
    switch (op) {
      case BinaryOp::kAdd:
        return run([](T g, T, T) { return g; });
      case BinaryOp::kSub:
        return first ? run([](T g, T, T) { return g; }) : run([](T g, T, T) { return -g; });
      case BinaryOp::kMul:
        return first ? run([](T g, T, T y) { return g * y; })
                     : run([](T g, T x, T) { return g * x; });
      case BinaryOp::kDiv:
        return first ? run([](T g, T, T y) { return g / y; })
                     : run([](T g, T x, T y) { return -g * x / (y * y); });
      case BinaryOp::kMaximum:
        return first ? run([](T g, T x, T y) { return x >= y ? g : T(0); })
                     : run([](T g, T x, T y) { return x >= y ? T(0) : g; });
      case BinaryOp::kMinimum:
        return first ? run([](T g, T x, T y) { return x <= y ? g : T(0); })
                     : run([](T g, T x, T y) { return x <= y ? T(0) : g; });
      case BinaryOp::kPow:
        return first ? run([](T g, T x, T y) { return g * y * std::pow(x, y - 1); })
                     : run([](T g, T x, T y) {
                         return x > 0 ? g * std::pow(x, y) * std::log(x) : T(0);
                       });
      case BinaryOp::kSquaredDifference:
        return first ? run([](T g, T x, T y) { return 2 * g * (x - y); })
                     : run([](T g, T x, T y) { return 2 * g * (y - x); });
    }
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto fn) {
      binary_map(a.data<T>(), a.shape(), b.data<T>(), b.shape(), out.data<bool>(), out.shape(),
                 [fn](T x, T y) -> bool { return fn(x, y); });
    };
    switch (op) {
      case CompareOp::kEqual:
        return run([](T x, T y) { return x == y; });
      case CompareOp::kGreater:
        return run([](T x, T y) { return x > y; });
      case CompareOp::kLess:
        return run([](T x, T y) { return x < y; });
    }
  });
}

void add_scaled(Tensor& target, const Tensor& x, double alpha) {
  if (target.dtype() == DType::kF32) {
    float* out = target.data<float>();
    const float* in = x.data<float>();
    const auto a = static_cast<float>(alpha);
    parallel_for(target.numel(), kElementwiseGrain,
                 [&](int64_t begin, int64_t end) { add_scaled_f32(out, in, a, begin, end); });
    return;
  }
  dispatch_numeric(target.dtype(), "add_scaled_in_place", [&](auto tag) {
    using T = decltype(tag);
    T a = static_cast<T>(alpha);
    T* out = target.data<T>();
    zip_map(out, x.data<T>(), out, target.numel(), [a](T v, T g) { return v + g * a; });
  });
}

void broadcast_to(const Tensor& x, Tensor& out) {
  dispatch_bytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    broadcast_copy(static_cast<const U*>(x.raw_data()), x.shape(), static_cast<U*>(out.raw_data()),
                   out.shape());
  });
}

}  // namespace est::ops::cpu
