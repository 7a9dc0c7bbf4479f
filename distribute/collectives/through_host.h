// Host staging for collectives whose transport is host memory (the ring, the coordination
// service): tensors on a device go through host copies, and the results come back in place.
#pragma once

#include <vector>

#include "ops/autograd.h"
#include "ops/tensor.h"

namespace est::distribute {

// Runs `collective` on `values`, or, when any is on a device, on host copies whose results are
// then copied back into the tensors on their devices.
template <class Fn>
inline void through_host(std::vector<Tensor>& values, Fn&& collective) {
  bool on_device = false;
  for (const Tensor& v : values) on_device = on_device || (v.defined() && !v.device().is_cpu());
  if (!on_device) {
    collective(values);
    return;
  }
  ops::NoGradGuard no_grad;
  std::vector<Tensor> host(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined()) host[i] = values[i].to(Device::cpu()).clone();
  collective(host);
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined()) values[i].copy_from(host[i]);
}

}  // namespace est::distribute
