// Binary elementwise ops with NumPy broadcasting, their scalar forms, comparisons, the
// optimizers' fused update, and the broadcast helpers (broadcast_to, sum_to) gradients are
// built from.
//
// Each op checks its operands (device, dtype, shapes) with messages naming the op, runs the
// registry's kernel for its family (OpId::kBinary, kCompare, ...) on the operands' device, and
// records one gradient that reduces back to each input's shape with sum_to. Gradient functions
// capture detached inputs only. Unary ops live in unary.cpp, reductions in reduce.cpp.
#include "ops/math.h"

#include <fmt/format.h>

#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/cpu/broadcast.h"
#include "ops/cpu/checks.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

// out = op(a, b), broadcasting; `float_only` ops reject integer dtypes.
Tensor binary_forward(const char* name, BinaryOp op, const Tensor& a, const Tensor& b,
                      bool float_only) {
  const Device device = common_device(name, {&a, &b});
  cpu::require_same_dtype(name, a, b);
  if (float_only) cpu::require_floating(name, a);
  cpu::require_numeric(name, a);
  Tensor out = Tensor::empty(cpu::broadcast_shape(name, a.shape(), b.shape()), a.dtype(), device);
  run_kernel<OpId::kBinary>(name, device, a.dtype(), op, a, b, out);
  return out;
}

// d(op(a, b))/d(input) * grad, with every operand broadcast to grad's shape, summed to `to`.
Tensor binary_gradient(const char* name, BinaryOp op, int input, const Tensor& grad,
                       const Tensor& a, const Tensor& b, const Shape& to) {
  Tensor out = Tensor::empty(grad.shape(), grad.dtype(), grad.device());
  run_kernel<OpId::kBinaryGradient>(name, grad.device(), grad.dtype(), op, input, grad, a, b, out);
  return sum_to(out, to);
}

// A binary op whose two gradients come from the binary_gradient kernel.
Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, bool float_only) {
  Tensor out = binary_forward(name, op, a, b, float_only);
  if (!needs_recording({&a, &b})) return out;
  return record(out, name, {a, b},
                [name, op, a = a.detach(), b = b.detach()](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  return {
                      needs[0] ? binary_gradient(name, op, 0, grad, a, b, a.shape()) : Tensor(),
                      needs[1] ? binary_gradient(name, op, 1, grad, a, b, b.shape()) : Tensor()};
                });
}

Tensor compare(const char* name, CompareOp op, const Tensor& a, const Tensor& b) {
  const Device device = common_device(name, {&a, &b});
  cpu::require_same_dtype(name, a, b);
  Tensor out =
      Tensor::empty(cpu::broadcast_shape(name, a.shape(), b.shape()), DType::kBool, device);
  run_kernel<OpId::kCompare>(name, device, a.dtype(), op, a, b, out);
  return out;
}

// A scalar in the tensor's dtype on its device, for the scalar overloads.
Tensor scalar_like(const Tensor& t, double value) {
  return Tensor::full({}, value, t.dtype(), t.device());
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  return cpu::broadcast_shape("broadcast_shapes", a, b);
}

// add and sub need no kernel for their gradients: the upstream gradient, summed to each shape.
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward("add", BinaryOp::kAdd, a, b, false);
  if (!needs_recording({&a, &b})) return out;
  return record(
      out, "add", {a, b},
      [sa = a.shape(), sb = b.shape()](const Tensor& grad,
                                       const NeedsGrad& needs) -> std::vector<Tensor> {
        return {needs[0] ? sum_to(grad, sa) : Tensor(), needs[1] ? sum_to(grad, sb) : Tensor()};
      });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward("sub", BinaryOp::kSub, a, b, false);
  if (!needs_recording({&a, &b})) return out;
  return record(out, "sub", {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& grad,
                                                 const NeedsGrad& needs) -> std::vector<Tensor> {
                  return {needs[0] ? sum_to(grad, sa) : Tensor(),
                          needs[1] ? sum_to(neg(grad), sb) : Tensor()};
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op("mul", BinaryOp::kMul, a, b, false);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op("div", BinaryOp::kDiv, a, b, true);
}

// Ties send the gradient to `a`, as TensorFlow does.
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op("maximum", BinaryOp::kMaximum, a, b, false);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op("minimum", BinaryOp::kMinimum, a, b, false);
}

// d/dexponent uses log(base), taken as 0 where base <= 0 (as TensorFlow does).
Tensor pow(const Tensor& base, const Tensor& exponent) {
  return binary_op("pow", BinaryOp::kPow, base, exponent, true);
}

Tensor squared_difference(const Tensor& a, const Tensor& b) {
  return binary_op("squared_difference", BinaryOp::kSquaredDifference, a, b, true);
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }

void add_scaled_in_place(Tensor& target, const Tensor& x, double alpha) {
  const char* name = "add_scaled_in_place";
  const Device device = common_device(name, {&target, &x});
  cpu::require_same_dtype(name, target, x);
  cpu::require_floating(name, target);
  if (target.shape() != x.shape())
    throw InvalidArgumentError(fmt::format("{}: target of shape {} but x of shape {}", name,
                                           shape_str(target.shape()), shape_str(x.shape())));
  run_kernel<OpId::kAddScaled>(name, device, target.dtype(), target, x, alpha);
}

Tensor equal(const Tensor& a, const Tensor& b) { return compare("equal", CompareOp::kEqual, a, b); }
Tensor greater(const Tensor& a, const Tensor& b) {
  return compare("greater", CompareOp::kGreater, a, b);
}
Tensor less(const Tensor& a, const Tensor& b) { return compare("less", CompareOp::kLess, a, b); }

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  const Device device = common_device("broadcast_to", {&x});
  if (cpu::broadcast_shape("broadcast_to", x.shape(), shape) != shape)
    throw InvalidArgumentError(fmt::format(
        "broadcast_to: a tensor of shape {} cannot be broadcast to {} (the target must keep every "
        "dimension of the input that is not 1)",
        shape_str(x.shape()), shape_str(shape)));
  if (x.shape() == shape) return x;
  Tensor out = Tensor::empty(shape, x.dtype(), device);
  run_kernel<OpId::kBroadcastTo>("broadcast_to", device, x.dtype(), x, out);
  if (!needs_recording({&x})) return out;
  return record(out, "broadcast_to", {x},
                [from = x.shape()](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {sum_to(grad, from)};
                });
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  common_device("sum_to", {&x});
  if (x.shape() == shape) return x;
  bool compatible = shape.size() <= x.shape().size();
  if (compatible) compatible = cpu::broadcast_shape("sum_to", shape, x.shape()) == x.shape();
  if (!compatible)
    throw InvalidArgumentError(
        fmt::format("sum_to: a tensor of shape {} cannot be summed to {} ({} does not broadcast "
                    "to the tensor's shape)",
                    shape_str(x.shape()), shape_str(shape), shape_str(shape)));
  std::vector<int> axes;
  size_t lead = x.shape().size() - shape.size();
  for (size_t i = 0; i < x.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1))
      axes.push_back(static_cast<int>(i));
  if (axes.empty()) return x.reshape(shape);
  return sum(x, axes, false).reshape(shape);
}

}  // namespace est::ops
