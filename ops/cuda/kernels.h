// The CUDA kernels of the registry ops this backend has (see ops/kernel_ops.h for what each
// computes), registered by ops/cuda/register.cpp: creation and copies, the elementwise
// families, reductions, and a dense layer's matmul (cuBLAS), bias, activation and gradients.
#pragma once

#include "ops/kernel_ops.h"

namespace est::ops::cuda {

// copy.cpp: host <-> device and device <-> device.
void copy(const Tensor& source, Tensor& target);

// kernels.cpp
void copy_on_device(const Tensor& source, Tensor& target);  // same device, on its compute stream
void fill(Tensor& out, double value);
void cast(const Tensor& x, Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
void binary_gradient(BinaryOp op, int input, const Tensor& grad, const Tensor& a, const Tensor& b,
                     Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out);
void unary(UnaryOp op, const UnaryParams& params, const Tensor& x, Tensor& y);
void unary_gradient(UnaryOp op, const UnaryParams& params, const Tensor& grad, const Tensor& saved,
                    Tensor& dx);
void add_scaled(Tensor& target, const Tensor& x, double alpha);
void broadcast_to(const Tensor& x, Tensor& out);
void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, Tensor& out);
void argmax(const Tensor& x, int axis, Tensor& out);
void bias_add(const Tensor& x, const Tensor& bias, Tensor& out);
void activate(const Tensor& x, Activation activation, Tensor& y);
void activation_gradient(const Tensor& grad, const Tensor& y, Activation activation, Tensor& dx);
void bias_gradient(const Tensor& grad, Tensor& out);

// matmul.cpp
void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulDims& dims, Activation activation);

}  // namespace est::ops::cuda
