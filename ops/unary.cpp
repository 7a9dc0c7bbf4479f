// Unary elementwise ops and activations: one registry op for the family (OpId::kUnary, and
// kUnaryGradient backward), so each backend implements it once; OpKind::kEltwise picks the CPU
// backend. The gradient reads the tensor unary_saves_output() names (the input, or the output
// where that is cheaper: sigmoid' = y (1 - y)); every backend saves the same one, so a forward
// on one backend and a backward on another agree.
#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, UnaryParams params = {}) {
  const Device device = common_device(name, {&x});
  cpu::require_floating(name, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device);
  run_kernel<OpId::kUnary>(name, device, x.dtype(), op, params, x, y);
  if (!needs_recording({&x})) return y;
  return record(y, name, {x},
                [name, op, params, saved = unary_saves_output(op) ? y.detach() : x.detach()](
                    const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor dx = Tensor::empty(saved.shape(), saved.dtype(), saved.device());
                  run_kernel<OpId::kUnaryGradient>(name, saved.device(), saved.dtype(), op, params,
                                                   grad, saved, dx);
                  return {dx};
                });
}

}  // namespace

// neg also serves the signed integer dtypes (its gradient only exists for floating ones).
Tensor neg(const Tensor& x) {
  const Device device = common_device("neg", {&x});
  if (is_floating(x.dtype())) return unary_op("neg", UnaryOp::kNeg, x);
  if (x.dtype() != DType::kI32 && x.dtype() != DType::kI64)
    throw InvalidArgumentError(
        fmt::format("neg: not defined for {} tensors; cast to a signed or floating dtype first",
                    dtype_name(x.dtype())));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device);
  run_kernel<OpId::kUnary>("neg", device, x.dtype(), UnaryOp::kNeg, UnaryParams{}, x, y);
  return y;
}

Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::kExp, x); }
Tensor log(const Tensor& x) { return unary_op("log", UnaryOp::kLog, x); }
Tensor sqrt(const Tensor& x) { return unary_op("sqrt", UnaryOp::kSqrt, x); }
Tensor square(const Tensor& x) { return unary_op("square", UnaryOp::kSquare, x); }
// The gradient at 0 is 0 (the subgradient TensorFlow picks).
Tensor abs(const Tensor& x) { return unary_op("abs", UnaryOp::kAbs, x); }
Tensor relu(const Tensor& x) { return unary_op("relu", UnaryOp::kRelu, x); }
Tensor sigmoid(const Tensor& x) { return unary_op("sigmoid", UnaryOp::kSigmoid, x); }
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::kTanh, x); }

Tensor pow(const Tensor& base, double exponent) {
  return unary_op("pow", UnaryOp::kPow, base, {.a = exponent});
}

// The gradient passes where min_value <= x <= max_value, as tf.clip_by_value's does.
Tensor clip(const Tensor& x, double min_value, double max_value) {
  if (!(min_value <= max_value))
    throw InvalidArgumentError(
        fmt::format("clip: min_value {} is greater than max_value {}; pass them in order",
                    min_value, max_value));
  return unary_op("clip", UnaryOp::kClip, x, {.a = min_value, .b = max_value});
}

}  // namespace est::ops
