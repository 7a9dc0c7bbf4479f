// Elementwise arithmetic with NumPy broadcasting, activations, reductions and comparisons.
// Each op records its gradient when an input requires one; broadcasting gradients are summed
// back to each input's shape.
#pragma once

#include <vector>

#include "ops/tensor.h"

namespace est::ops {

// Binary, broadcasting. Both operands must have the same dtype.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor squared_difference(const Tensor& a, const Tensor& b);  // (a - b)^2

// With a scalar (converted to the tensor's dtype).
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor pow(const Tensor& base, double exponent);

// target += alpha * x in place, no gradient recorded: the fused update of gradient-descent
// optimizers (one pass instead of mul, add and a copy; the compiler may fuse the multiply-add,
// so the result can differ from add(target, mul(x, alpha)) by one rounding). Same shape and
// floating dtype (InvalidArgumentError naming both otherwise).
void add_scaled_in_place(Tensor& target, const Tensor& x, double alpha);

// Unary.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor clip(const Tensor& x, double min_value, double max_value);

// Reductions over `axes` (all axes when empty; negative axes count from the end).
Tensor sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor argmax(const Tensor& x, int axis);  // int64 indices, axis removed; no gradient

// Comparisons: bool tensors, broadcasting, no gradient.
Tensor equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);

// Sums `x` down to `shape` (the inverse of broadcasting `shape` to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Shape broadcast_shapes(const Shape& a, const Shape& b);  // InvalidArgumentError when incompatible

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }

}  // namespace est::ops
