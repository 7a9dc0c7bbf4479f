// The CUDA kernels of the registry ops (see ops/kernel_ops.h for what each computes), registered
// by ops/cuda/register.cpp, and the helpers other CUDA files share.
#pragma once

#include "ops/kernel_ops.h"

namespace est::ops::cuda {

// The kernel of each registry op this backend has, named as the op in ops/op_list.h
// (cuda::one_hot), with its parameters; ops/cuda/register.cpp registers them. Declared for every
// op, defined for those it implements: copy.cpp (host <-> device and device <-> device),
// kernels.cpp (fill, cast, the elementwise families, reductions, bias and activation),
// matmul.cpp, layout_kernels.cpp (layout and indexing), softmax_loss_kernels.cpp (dropout's mask,
// softmax, the cross-entropies), conv.cpp (through cuDNN, the window's asymmetric SAME padding
// made explicit), pool.cpp, batch_norm.cpp, optimizer.cpp (the fused updates, one launch per
// step in optimizer.cu).
#define EST_DECLARE_KERNEL(ID, NAME, KIND, REFERENCE, ...) void NAME(__VA_ARGS__);
EST_REGISTRY_OPS(EST_DECLARE_KERNEL)
#undef EST_DECLARE_KERNEL

// kernels.cpp
void copy_on_device(const Tensor& source, Tensor& target);  // same device, on its compute stream
// One reduction pass, `in` [outer, r, inner] -> `out` [outer, inner], laid out by
// ops/cuda/reduce_plan.h (the rows split across blocks when the columns are few: the conv
// bias gradient).
void reduce_axis(ReduceOp op, const Tensor& in, Tensor& out, int64_t outer, int64_t r,
                 int64_t inner);

// matmul.cpp: cuBLAS handles made so far by the process's pool (all GPUs): threads that end
// give theirs back for the next ones (ops/cuda/handle_pool.h).
int64_t cublas_handles_created();

}  // namespace est::ops::cuda
