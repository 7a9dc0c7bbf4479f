// Reference kernels of the unary ops and activations, forward and backward side by side.
//
// Each op is a forward function of one value and a backward function of (upstream gradient,
// saved value), where the saved value is the input or the output, whichever makes the
// derivative cheapest (sigmoid' = y (1 - y)); ops::unary_saves_output says which, for every
// backend alike. neg also serves the integer dtypes; the others are floating only.
#include <algorithm>
#include <cmath>

#include "ops/cpu/checks.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/kernels.h"

namespace est::ops::cpu {
namespace {

template <class T>
T sigmoid_of(T v) {
  // Written so that neither branch overflows: exp of a non-positive number only.
  if (v >= 0) return T(1) / (T(1) + std::exp(-v));
  T e = std::exp(v);
  return e / (T(1) + e);
}

template <class T>
void forward_typed(UnaryOp op, const UnaryParams& p, const T* x, T* y, int64_t n) {
  auto run = [&](auto fn) { unary_map(x, y, n, [fn](T v) { return static_cast<T>(fn(v)); }); };
  switch (op) {
    case UnaryOp::kNeg:
      return run([](T v) { return -v; });
    case UnaryOp::kExp:
      return run([](T v) { return std::exp(v); });
    case UnaryOp::kLog:
      return run([](T v) { return std::log(v); });
    case UnaryOp::kSqrt:
      return run([](T v) { return std::sqrt(v); });
    case UnaryOp::kSquare:
      return run([](T v) { return v * v; });
    case UnaryOp::kAbs:
      return run([](T v) { return std::abs(v); });
    case UnaryOp::kRelu:
      return run([](T v) { return v > 0 ? v : T(0); });
    case UnaryOp::kSigmoid:
      return run([](T v) { return sigmoid_of(v); });
    case UnaryOp::kTanh:
      return run([](T v) { return std::tanh(v); });
    case UnaryOp::kClip: {
      const T low = static_cast<T>(p.a), high = static_cast<T>(p.b);
      return run([low, high](T v) { return std::min(std::max(v, low), high); });
    }
    case UnaryOp::kPow: {
      const T e = static_cast<T>(p.a);
      if (p.a == 2.0) return run([](T v) { return v * v; });
      if (p.a == 0.5) return run([](T v) { return std::sqrt(v); });
      return run([e](T v) { return std::pow(v, e); });
    }
  }
}

// `s` is the saved value: the output for exp, sqrt, sigmoid and tanh, else the input.
// abs' gradient at 0 is 0 (the subgradient TensorFlow picks); clip's passes where
// low <= x <= high, as tf.clip_by_value's does.
template <class T>
void backward_typed(UnaryOp op, const UnaryParams& p, const T* g, const T* s, T* dx, int64_t n) {
  auto run = [&](auto fn) {
    zip_map(g, s, dx, n, [fn](T gv, T sv) { return static_cast<T>(fn(gv, sv)); });
  };
  switch (op) {
    case UnaryOp::kNeg:
      return run([](T gv, T) { return -gv; });
    case UnaryOp::kExp:
      return run([](T gv, T y) { return gv * y; });
    case UnaryOp::kLog:
      return run([](T gv, T v) { return gv / v; });
    case UnaryOp::kSqrt:
      return run([](T gv, T y) { return gv / (2 * y); });
    case UnaryOp::kSquare:
      return run([](T gv, T v) { return 2 * gv * v; });
    case UnaryOp::kAbs:
      return run([](T gv, T v) { return v > 0 ? gv : (v < 0 ? -gv : T(0)); });
    case UnaryOp::kRelu:
      return run([](T gv, T v) { return v > 0 ? gv : T(0); });
    case UnaryOp::kSigmoid:
      return run([](T gv, T y) { return gv * y * (1 - y); });
    case UnaryOp::kTanh:
      return run([](T gv, T y) { return gv * (1 - y * y); });
    case UnaryOp::kClip: {
      const T low = static_cast<T>(p.a), high = static_cast<T>(p.b);
      return run([low, high](T gv, T v) { return v >= low && v <= high ? gv : T(0); });
    }
    case UnaryOp::kPow: {
      const T e = static_cast<T>(p.a);
      return run([e](T gv, T v) { return gv * e * std::pow(v, e - 1); });
    }
  }
}

}  // namespace

void unary(UnaryOp op, const UnaryParams& params, const Tensor& x, Tensor& y) {
  if (op == UnaryOp::kNeg && !is_floating(x.dtype())) {
    dispatch_numeric(x.dtype(), "neg", [&](auto tag) {
      using T = decltype(tag);
      unary_map(x.data<T>(), y.data<T>(), x.numel(), [](T v) { return static_cast<T>(-v); });
    });
    return;
  }
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    forward_typed<T>(op, params, x.data<T>(), y.data<T>(), x.numel());
  });
}

void unary_gradient(UnaryOp op, const UnaryParams& params, const Tensor& grad, const Tensor& saved,
                    Tensor& dx) {
  dispatch_float(saved.dtype(), "unary_gradient", [&](auto tag) {
    using T = decltype(tag);
    backward_typed<T>(op, params, grad.data<T>(), saved.data<T>(), dx.data<T>(), saved.numel());
  });
}

}  // namespace est::ops::cpu
