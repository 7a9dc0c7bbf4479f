// copy_to, Tensor::to and copy_between: a copy is one kCopy kernel, looked up on the side of
// the copy that is not host memory, so the GPU backend owns host <-> device transfers (its
// pinned staging buffers and copy stream); the gradient of a copy is the copy back. Strings
// (host only) are assigned element by element here; a sparse tensor moves as its two parts.
#include "ops/copy.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/registry.h"

namespace est::ops {

void copy_between(const Tensor& source, Tensor& target) {
  if (source.shape() != target.shape() || source.dtype() != target.dtype())
    throw InvalidArgumentError(fmt::format("copy: source {} {} does not match target {} {}",
                                           dtype_name(source.dtype()), shape_str(source.shape()),
                                           dtype_name(target.dtype()), shape_str(target.shape())));
  if (source.dtype() == DType::kString) {  // both on the CPU: Tensor::empty allows no other
    const std::string* from = source.data<std::string>();
    std::string* to = target.data<std::string>();
    if (from != to) std::copy(from, from + source.numel(), to);
    return;
  }
  const Device device = source.device().is_cpu() ? target.device() : source.device();
  run_kernel<OpId::kCopy>("copy_to", device, source.dtype(), source, target);
}

Tensor copy_to(const Tensor& x, Device device) {
  if (!x.defined()) throw InvalidArgumentError("copy_to: the tensor is undefined");
  if (x.device() == device) return x;
  if (x.is_sparse())
    return Tensor::sparse(copy_to(x.indices(), device), copy_to(x.values(), device), x.shape());
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  copy_between(x, out);
  if (!needs_recording({&x})) return out;
  return record(out, "copy_to", {x},
                [from = x.device()](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {copy_to(grad, from)};
                });
}

Tensor Tensor::to(Device device) const { return copy_to(*this, device); }

}  // namespace est::ops
