// softmax and log_softmax over any axis, forward and backward, through the registry's
// kSoftmax / kSoftmaxGradient (OpKind::kSoftmax picks the CPU backend; oneDNN covers the last
// axis in float32). The backward needs only the forward output, saved detached.
#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/nn_ops.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

Tensor softmax_op(const char* name, const Tensor& logits, int axis, bool log) {
  const Device device = common_device(name, {&logits});
  cpu::require_floating(name, logits);
  if (logits.rank() == 0)
    throw InvalidArgumentError(fmt::format("{}: needs at least one axis, got a scalar", name));
  const int a = cpu::normalize_axis(name, axis, logits.rank());
  Tensor out = Tensor::empty(logits.shape(), logits.dtype(), device);
  run_kernel<OpId::kSoftmax>(name, device, logits.dtype(), logits, a, log, out);
  if (!needs_recording({&logits})) return out;
  return record(out, name, {logits},
                [name, y = out.detach(), a, log](const Tensor& grad,
                                                 const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
                  run_kernel<OpId::kSoftmaxGradient>(name, y.device(), y.dtype(), grad, y, a, log,
                                                     dx);
                  return {dx};
                });
}

}  // namespace

Tensor softmax(const Tensor& logits, int axis) {
  return softmax_op("softmax", logits, axis, false);
}

Tensor log_softmax(const Tensor& logits, int axis) {
  return softmax_op("log_softmax", logits, axis, true);
}

}  // namespace est::ops
