// The CUDA kernels' host-side entry points, over raw device pointers: what ops/cuda/kernels.cpp
// (which turns Tensors into pointers, shapes and strides) calls, and the .cu files implement.
//
// This header is shared by g++ and nvcc, so it includes only plain headers (no Tensor, no fmt).
// Every function queues its kernel on `stream` (the device's compute stream) and returns at once;
// a failed launch throws (check.h). Kernels are grid-stride loops over the output; reductions
// reduce one [outer, r, inner] pass at a time, as the CPU kernels do.
#pragma once

#include <cstdint>

#include "ops/dtype.h"
#include "ops/op_enums.h"

namespace est::ops::cuda {

using Stream = void*;
constexpr int kMaxRank = 8;

// How each operand of an elementwise kernel is read: the output's shape and, per operand, the
// element stride along each output dimension (0 where the operand is broadcast). An operand
// with the output's shape is read at the flat output index (`contiguous`).
struct Broadcast {
  int rank = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};
  bool contiguous[3] = {};
};

// elementwise.cu
void fill(DType dtype, void* out, int64_t n, double value, Stream stream);
void cast(DType from, DType to, const void* x, void* out, int64_t n, Stream stream);
void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, int64_t n,
            const Broadcast& broadcast, Stream stream);
// d(op)/d(input) * grad for input 0 or 1; operands 0, 1, 2 of `broadcast` are grad, a, b.
void binary_gradient(BinaryOp op, int input, DType dtype, const void* grad, const void* a,
                     const void* b, void* out, int64_t n, const Broadcast& broadcast,
                     Stream stream);
void compare(CompareOp op, DType dtype, const void* a, const void* b, bool* out, int64_t n,
             const Broadcast& broadcast, Stream stream);
void broadcast_copy(DType dtype, const void* x, void* out, int64_t n, const Broadcast& broadcast,
                    Stream stream);
void unary(UnaryOp op, UnaryParams params, DType dtype, const void* x, void* y, int64_t n,
           Stream stream);
void unary_gradient(UnaryOp op, UnaryParams params, DType dtype, const void* grad,
                    const void* saved, void* dx, int64_t n, Stream stream);
void add_scaled(DType dtype, void* target, const void* x, double alpha, int64_t n, Stream stream);

// reduce.cu: in [outer, r, inner] -> out [outer, inner]; float sums accumulate in double.
// `plan` null: one block per row (inner must be 1); else the plan's layout, with `partials`
// (8 * plan->row_chunks * plan->columns bytes) when it has more than one row chunk.
struct ColumnReducePlan;
void reduce_pass(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t r,
                 int64_t inner, const ColumnReducePlan* plan, void* partials, Stream stream);
// The index of the first maximum along r (a NaN counts as larger than any number).
void argmax(DType dtype, const void* in, int64_t* out, int64_t outer, int64_t r, int64_t inner,
            Stream stream);

// layer.cu: x [rows, channels] += bias (when not null), then the activation, in place.
void bias_activation(DType dtype, void* x, const void* bias, Activation activation, int64_t rows,
                     int64_t channels, Stream stream);
// dx = grad * activation'(.), from the activation's output y.
void activation_gradient(DType dtype, const void* grad, const void* y, void* dx,
                         Activation activation, int64_t n, Stream stream);

}  // namespace est::ops::cuda
