// Moving tensors between devices: the only place where data crosses from host memory to a GPU
// or back. Ops never copy implicitly (an op given a CPU and a GPU tensor is an error naming
// both devices); a program moves a tensor once, explicitly, with tensor.to(device) or copy_to.
#pragma once

#include "ops/tensor.h"

namespace est::ops {

// `x` on `device`: x itself when it is already there, else a copy (TensorFlow's copy between
// devices, PyTorch's tensor.to). The gradient of the copy is copied back to x's device.
// /cpu:N devices share host memory, but a copy to another one is still a copy.
Tensor copy_to(const Tensor& x, Device device);

// Copies `source` into `target` (same shape and dtype; any devices) with the registry's kCopy
// kernel of the device that is not the CPU (host <-> GPU copies are the GPU backend's), or the
// CPU's when both are host memory. No autograd.
void copy_between(const Tensor& source, Tensor& target);

}  // namespace est::ops
