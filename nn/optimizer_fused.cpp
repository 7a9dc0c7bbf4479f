// The fused update path's checks: one device, one dtype, a kernel for them.
#include "nn/optimizer_fused.h"

namespace est::nn::optim {

bool can_fuse(ops::OpId id, const std::vector<GradAndVar>& grads,
              std::initializer_list<const std::vector<Tensor>*> slots) {
  if (grads.empty()) return false;
  const Tensor& first = grads.front().variable;
  const ops::Device device = first.device();
  const ops::DType dtype = first.dtype();
  auto same = [&](const Tensor& t) {
    return t.defined() && t.dtype() == dtype &&
           (device.is_cpu() ? t.device().is_cpu() : t.device() == device);
  };
  for (const GradAndVar& entry : grads)
    if (!same(entry.variable) || !same(entry.gradient)) return false;
  for (const std::vector<Tensor>* list : slots)
    for (const Tensor& slot : *list)
      if (!same(slot)) return false;
  const ops::KernelTarget target =
      device.is_cpu() ? ops::KernelTarget{ops::DeviceType::kCPU, ops::Backend::kReference}
                      : ops::KernelTarget{device.type, ops::Backend::kCuda};
  return ops::KernelRegistry::global().find_erased(id, target, dtype) != nullptr;
}

std::vector<Tensor> variables_of(const std::vector<GradAndVar>& grads) {
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const GradAndVar& entry : grads) out.push_back(entry.variable);
  return out;
}

std::vector<Tensor> gradients_of(const std::vector<GradAndVar>& grads) {
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const GradAndVar& entry : grads) out.push_back(entry.gradient);
  return out;
}

}  // namespace est::nn::optim
