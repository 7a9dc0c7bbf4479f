// The oneDNN (float32) kernels: eltwise activations, softmax, matmul/linear, conv2d, pooling and
// batch norm, registered in the kernel registry by ops/onednn/register.cpp (which adapts them to
// the signatures of ops/kernel_ops.h). Outputs are written into tensors the caller allocated.
// Activations stay NHWC / row-major at every boundary (a Tensor is always plain); kernels that
// prefer blocked weights reorder them, and what forward computes for backward (reordered
// weights, the max-pooling workspace) is returned explicitly so the gradient closure keeps it.
// Primitives are cached per thread (context.h) by op and shape, so a steady-state call builds
// nothing.
#pragma once

#include "ops/cpu/matmul_reference.h"
#include "ops/cpu/pool_reference.h"
#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::ops::onednn {

enum class Eltwise : uint8_t { kRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kAbs };

// y = f(x) for a float32 tensor of any shape.
void eltwise_forward(Eltwise kind, const Tensor& x, Tensor& y);
// d(loss)/dx from d(loss)/dy and the saved tensor: the forward output for sigmoid, tanh, exp
// and sqrt, the input for the others (as ops::unary_saves_output says).
void eltwise_backward(Eltwise kind, const Tensor& grad_output, const Tensor& saved, Tensor& dx);

// Softmax or log-softmax over the last axis of a float32 tensor.
void softmax_forward(const Tensor& logits, bool log, Tensor& out);
// d(loss)/d(logits) from d(loss)/d(output) and the forward output.
void softmax_backward(const Tensor& grad_output, const Tensor& output, bool log, Tensor& dx);

// Floating-point operations (2 x batch x M x N x K) below which a matmul runs on the calling
// thread alone: [64, k] x [k, n] took 1.23-1.38x as long split over two threads as on one at
// 2e4-8e4 flops, 0.99 at 2^19, 0.84-0.88 at 2^20 (threads_bench --grain, bench/README.md).
inline constexpr int64_t kSerialMatmulFlops = int64_t{1} << 19;
bool matmul_runs_serially(const cpu::MatmulDims& dims);

// out [batch, M, N] = activation(op(a) @ op(b) + bias); bias [N] or undefined.
void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const cpu::MatmulDims& dims, Activation activation);

// Convolution, bias and activation fused. `kernel_for_backward` receives the kernel in the
// layout the primitive chose (undefined when that is HWIO itself), for conv2d_backward_data.
void conv2d_forward(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                    const cpu::Window2D& window, Activation activation, Tensor& output,
                    Tensor* kernel_for_backward);
// grad_input [N, H, W, C] from the gradient before the activation, grad_pre [N, OH, OW, OC].
void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& kernel_for_backward, const cpu::Window2D& window,
                          Activation activation, bool has_bias, Tensor& grad_input);
// grad_kernel [KH, KW, C, OC] and, when grad_bias is not null, grad_bias [OC].
void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre,
                             const cpu::Window2D& window, Activation activation, bool has_bias,
                             Tensor& grad_kernel, Tensor* grad_bias);

// Pooling into output [N, OH, OW, C]. Training max pooling also sets `workspace` (argmax
// positions, bytes) for backward; it stays undefined otherwise.
void pool2d_forward(const Tensor& input, const cpu::Window2D& window, cpu::PoolKind kind,
                    bool training, Tensor& output, Tensor& workspace);
void pool2d_backward(const Tensor& grad_output, const Tensor& workspace,
                     const cpu::Window2D& window, cpu::PoolKind kind, Tensor& grad_input);

// Batch norm over x viewed as [rows, C]. gamma/beta may be undefined. Training computes the
// batch statistics into mean/variance; inference reads them.
void batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                        Tensor& variance, double epsilon, bool training, Tensor& y);
// Gradients; null outputs are skipped.
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad_y,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta);

}  // namespace est::ops::onednn
