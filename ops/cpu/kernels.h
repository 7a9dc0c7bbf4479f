// The reference CPU kernels, one per registry op (ops/kernel_ops.h gives each signature's
// meaning), registered by ops/cpu/register.cpp. They handle every dtype the op allows and
// every shape, empty tensors included, so the registry can fall back on them for any case
// another backend declines; every other backend is tested against them (tests/ops/harness.h).
#pragma once

#include "ops/kernel_ops.h"

namespace est::ops::cpu {

// One kernel per entry of ops/op_list.h, named as the op (cpu::one_hot), with its parameters;
// ops/cpu/register.cpp registers them all. Where they are: elementwise_kernels.cpp (fill, copy,
// cast, binary, compare, add_scaled, broadcast_to), unary_kernels.cpp, reduce_kernels.cpp
// (reduce, argmax), array_kernels.cpp (layout and indexing), loss_kernels.cpp (dropout, softmax,
// the cross-entropies), layer_kernels.cpp (dense layers, convolution, pooling, batch norm),
// optimizer_kernels.cpp (the fused updates, float32 and float64).
#define EST_DECLARE_KERNEL(ID, NAME, KIND, REFERENCE, ...) void NAME(__VA_ARGS__);
EST_REGISTRY_OPS(EST_DECLARE_KERNEL)
#undef EST_DECLARE_KERNEL

}  // namespace est::ops::cpu
