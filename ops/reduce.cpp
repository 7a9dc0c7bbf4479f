// Reductions (sum, mean, max, argmax) over any set of axes, with keepdims: argument checks,
// the registry's kReduce / kArgmax kernel on the input's device, and the gradients (the
// upstream gradient broadcast back; max shares it among the elements that tie for the maximum).
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

Shape keepdims_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape kept = shape;
  for (int a : axes) kept[static_cast<size_t>(a)] = 1;
  return kept;
}

// x reduced over the normalised `axes` (removed from the shape).
Tensor reduce(const char* name, ReduceOp op, const Tensor& x, const std::vector<int>& axes) {
  const Device device = common_device(name, {&x});
  cpu::require_numeric(name, x);
  std::vector<bool> reduced(x.shape().size(), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  Shape out_shape;
  for (size_t d = 0; d < x.shape().size(); ++d)
    if (!reduced[d]) out_shape.push_back(x.shape()[d]);
  Tensor out = Tensor::empty(out_shape, x.dtype(), device);
  run_kernel<OpId::kReduce>(name, device, x.dtype(), op, x, axes, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  common_device("sum", {&x});
  std::vector<int> normalized = cpu::normalize_axes("sum", axes, x.rank());
  Tensor out = reduce("sum", ReduceOp::kSum, x, normalized);
  Shape kept = keepdims_shape(x.shape(), normalized);
  if (keepdims) out = out.reshape(kept);
  if (!needs_recording({&x})) return out;
  return record(
      out, "sum", {x},
      [kept, from = x.shape()](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
        return {broadcast_to(grad.reshape(kept), from)};
      });
}

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  common_device("mean", {&x});
  cpu::require_floating("mean", x);
  std::vector<int> normalized = cpu::normalize_axes("mean", axes, x.rank());
  int64_t count = 1;
  for (int a : normalized) count *= x.shape()[static_cast<size_t>(a)];
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(sum(x, normalized, keepdims), 1.0 / static_cast<double>(count));
  }
  if (!needs_recording({&x})) return out;
  Shape kept = keepdims_shape(x.shape(), normalized);
  return record(
      out, "mean", {x},
      [kept, from = x.shape(), count](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
        return {broadcast_to(mul(grad.reshape(kept), 1.0 / static_cast<double>(count)), from)};
      });
}

// The gradient is shared equally among the elements that tie for the maximum.
Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  common_device("max", {&x});
  std::vector<int> normalized = cpu::normalize_axes("max", axes, x.rank());
  Tensor out = reduce("max", ReduceOp::kMax, x, normalized);
  Shape kept = keepdims_shape(x.shape(), normalized);
  if (keepdims) out = out.reshape(kept);
  if (!needs_recording({&x})) return out;
  return record(out, "max", {x},
                [kept, normalized, x = x.detach(), result = out.detach()](
                    const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor mask = cast(equal(x, result.reshape(kept)), x.dtype());
                  Tensor ties = sum(mask, normalized, true);
                  return {mul(mask, div(grad.reshape(kept), ties))};
                });
}

Tensor argmax(const Tensor& x, int axis) {
  const Device device = common_device("argmax", {&x});
  const int a = cpu::normalize_axis("argmax", axis, x.rank());
  const Shape& shape = x.shape();
  if (shape[static_cast<size_t>(a)] == 0)
    throw InvalidArgumentError(fmt::format(
        "argmax: axis {} of shape {} is empty, so it has no maximum", axis, shape_str(shape)));
  Shape out_shape = shape;
  out_shape.erase(out_shape.begin() + a);
  Tensor out = Tensor::empty(out_shape, DType::kI64, device);
  run_kernel<OpId::kArgmax>("argmax", device, x.dtype(), x, a, out);
  return out;
}

}  // namespace est::ops
