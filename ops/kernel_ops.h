// The ops of the kernel registry and the signature every backend's kernel for each one has:
// the contract between the op files (ops/*.cpp) and the backends (ops/cpu, ops/onednn,
// ops/cuda).
//
// A kernel computes; it does not check arguments, allocate its outputs or record gradients.
// The op file validates the inputs, allocates every output on the inputs' device (so a kernel
// writes into tensors of the right shape, dtype and device), looks the kernel up (registry.h)
// and records the gradient. Kernels return nothing; outputs are the `Tensor&` / `Tensor*`
// arguments (a null pointer: that output is not wanted). What a backward kernel needs from its
// forward beyond the op's inputs and outputs is explicit state the forward kernel sets (pooling's
// `workspace`, conv2d's `kernel_for_backward`), and backward runs on the backend forward ran on.
// Families of elementwise ops share one registry op with an enum (BinaryOp, UnaryOp, ...) so that a
// backend implements the family once. A CPU kernel other than the reference may throw
// UnimplementedError for a case it lacks (a shape oneDNN has no primitive for): the registry then
// runs the reference kernel instead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/matmul_reference.h"
#include "ops/cpu/pool_reference.h"
#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/op_enums.h"
#include "ops/random.h"
#include "ops/tensor.h"

namespace est::ops {

using cpu::MatmulDims;
using cpu::PoolKind;
using cpu::Window2D;

enum class OpId : uint8_t {
  // Creation and copies.
  kFill,  // (out, value)
  kCopy,  // (source, target): same shape and dtype; devices may differ (see copy_to)
  kCast,  // (x, out): out has another dtype
  // Elementwise.
  kBinary,          // (op, a, b, out): a and b broadcast to out's shape
  kBinaryGradient,  // (op, input, grad, a, b, out): d(op)/d(input 0 or 1) * grad, grad's shape
  kCompare,         // (op, a, b, out): bool, broadcasting
  kUnary,           // (op, params, x, y)
  kUnaryGradient,   // (op, params, grad, saved, dx): saved is x or y, unary_saves_output(op)
  kAddScaled,       // (target, x, alpha): target += alpha * x in place
  kBroadcastTo,     // (x, out)
  // Reductions.
  kReduce,  // (op, x, axes, out): axes normalised and sorted; out has them removed
  kArgmax,  // (x, axis, out): int64
  // Layout and indexing.
  kTranspose,       // (x, perm, out)
  kConcat,          // (inputs, axis, out)
  kSlice,           // (x, begin, out): out's shape is the window's size
  kSliceGradient,   // (grad, begin, dx): grad written into the window, zeros elsewhere
  kGather,          // (params, indices, axis, out): indices checked, an id out of range throws
  kGatherGradient,  // (grad, indices, axis, dparams): scatter-add into zeros
  kOneHot,          // (indices, on_value, off_value, out)
  kDropoutMask,     // (rate, generator, mask): 0 or 1 / (1 - rate) per element
  // Softmax and losses.
  kSoftmax,                      // (x, axis, log, y)
  kSoftmaxGradient,              // (grad, y, axis, log, dx)
  kSparseCrossEntropy,           // (labels, logits, loss, probs)
  kSparseCrossEntropyGradient,   // (grad, labels, probs, dlogits)
  kCrossEntropy,                 // (labels, logits, loss, probs, lse)
  kCrossEntropyGradient,         // (grad, labels, logits, probs, lse, dlabels*, dlogits*)
  kSigmoidCrossEntropy,          // (labels, logits, loss)
  kSigmoidCrossEntropyGradient,  // (grad, labels, logits, dlabels*, dlogits*)
  // Dense layers.
  kMatmul,              // (a, b, bias, out, dims, activation): activation(op(a) @ op(b) + bias)
  kBiasAdd,             // (x, bias, out)
  kActivation,          // (x, activation, y)
  kActivationGradient,  // (grad, y, activation, dx): from the activation's output y
  kBiasGradient,        // (grad, out): sums over every axis but the last
  // Convolution, pooling, batch norm.
  kConv2D,                   // (input, kernel, bias, window, activation, output, saved*)
  kConv2DBackwardData,       // (grad_pre, kernel, saved, window, activation, has_bias, grad_input)
  kConv2DBackwardWeights,    // (input, grad_pre, window, activation, has_bias, dkernel, dbias*)
  kConv2DWeightsFromOutput,  // (input, grad, y, window, activation, has_bias, dkernel, dbias*)
  kPool2D,                   // (input, window, kind, training, output, workspace)
  kPool2DGradient,           // (grad, workspace, window, kind, grad_input)
  kBatchNorm,                // (x, gamma, beta, mean, variance, epsilon, training, y)
  kBatchNormGradient,        // (x, gamma, beta, mean, variance, grad, eps, training, dx*, dg*, db*)
  // Fused optimizer updates (TF1's training ops): every variable of a step in one call, in
  // place, each list one tensor per variable (same shape and dtype, one device). The formulas
  // and their float operation order are nn/optimizers.h's, scalars rounded to the dtype first.
  kApplySgd,       // (variables, gradients, lr): var -= lr * g (as kAddScaled with -lr)
  kApplyMomentum,  // (variables, gradients, accumulators, lr, momentum, nesterov)
  kApplyAdam,      // (variables, gradients, m, v, step_size, beta1, beta2, epsilon)
  kApplyAdagrad,   // (variables, gradients, accumulators, lr)
  kApplyRmsprop,   // (variables, gradients, mean_square, mean_gradient, moment, params)
};
inline constexpr int kNumOpIds = static_cast<int>(OpId::kApplyRmsprop) + 1;

// kApplyRmsprop's scalars; mean_gradient is empty unless `centered`.
struct RmspropParams {
  double learning_rate = 0;
  double decay = 0;
  double momentum = 0;
  double epsilon = 0;
  bool centered = false;
};

// The name of a registry op ("binary", "conv2d_backward_data") and the CPU op kind whose
// backend table (backend_table.h) picks its CPU backend; ops without a kind run on the
// reference on the CPU unless a BackendGuard asks for another backend that has a kernel.
struct OpInfo {
  std::string_view name;
  std::optional<OpKind> kind;
};
OpInfo op_info(OpId id);

// The kernel signature of each op, as a function pointer type: KernelFn<OpId::kBinary>.
template <OpId id>
struct OpSignature;
template <OpId id>
using KernelFn = typename OpSignature<id>::Fn;

#define EST_OP_SIGNATURE(ID, ...)     \
  template <>                         \
  struct OpSignature<OpId::ID> {      \
    using Fn = void (*)(__VA_ARGS__); \
  };

EST_OP_SIGNATURE(kFill, Tensor& out, double value)
EST_OP_SIGNATURE(kCopy, const Tensor& source, Tensor& target)
EST_OP_SIGNATURE(kCast, const Tensor& x, Tensor& out)
EST_OP_SIGNATURE(kBinary, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out)
EST_OP_SIGNATURE(kBinaryGradient, BinaryOp op, int input, const Tensor& grad, const Tensor& a,
                 const Tensor& b, Tensor& out)
EST_OP_SIGNATURE(kCompare, CompareOp op, const Tensor& a, const Tensor& b, Tensor& out)
EST_OP_SIGNATURE(kUnary, UnaryOp op, const UnaryParams& params, const Tensor& x, Tensor& y)
EST_OP_SIGNATURE(kUnaryGradient, UnaryOp op, const UnaryParams& params, const Tensor& grad,
                 const Tensor& saved, Tensor& dx)
EST_OP_SIGNATURE(kAddScaled, Tensor& target, const Tensor& x, double alpha)
EST_OP_SIGNATURE(kBroadcastTo, const Tensor& x, Tensor& out)
EST_OP_SIGNATURE(kReduce, ReduceOp op, const Tensor& x, const std::vector<int>& axes, Tensor& out)
EST_OP_SIGNATURE(kArgmax, const Tensor& x, int axis, Tensor& out)
EST_OP_SIGNATURE(kTranspose, const Tensor& x, const std::vector<int>& perm, Tensor& out)
EST_OP_SIGNATURE(kConcat, const std::vector<Tensor>& inputs, int axis, Tensor& out)
EST_OP_SIGNATURE(kSlice, const Tensor& x, const std::vector<int64_t>& begin, Tensor& out)
EST_OP_SIGNATURE(kSliceGradient, const Tensor& grad, const std::vector<int64_t>& begin, Tensor& dx)
EST_OP_SIGNATURE(kGather, const Tensor& params, const Tensor& indices, int axis, Tensor& out)
EST_OP_SIGNATURE(kGatherGradient, const Tensor& grad, const Tensor& indices, int axis,
                 Tensor& dparams)
EST_OP_SIGNATURE(kOneHot, const Tensor& indices, double on_value, double off_value, Tensor& out)
EST_OP_SIGNATURE(kDropoutMask, double rate, Generator& generator, Tensor& mask)
EST_OP_SIGNATURE(kSoftmax, const Tensor& x, int axis, bool log, Tensor& y)
EST_OP_SIGNATURE(kSoftmaxGradient, const Tensor& grad, const Tensor& y, int axis, bool log,
                 Tensor& dx)
EST_OP_SIGNATURE(kSparseCrossEntropy, const Tensor& labels, const Tensor& logits, Tensor& loss,
                 Tensor& probs)
EST_OP_SIGNATURE(kSparseCrossEntropyGradient, const Tensor& grad, const Tensor& labels,
                 const Tensor& probs, Tensor& dlogits)
EST_OP_SIGNATURE(kCrossEntropy, const Tensor& labels, const Tensor& logits, Tensor& loss,
                 Tensor& probs, Tensor& lse)
EST_OP_SIGNATURE(kCrossEntropyGradient, const Tensor& grad, const Tensor& labels,
                 const Tensor& logits, const Tensor& probs, const Tensor& lse, Tensor* dlabels,
                 Tensor* dlogits)
EST_OP_SIGNATURE(kSigmoidCrossEntropy, const Tensor& labels, const Tensor& logits, Tensor& loss)
EST_OP_SIGNATURE(kSigmoidCrossEntropyGradient, const Tensor& grad, const Tensor& labels,
                 const Tensor& logits, Tensor* dlabels, Tensor* dlogits)
EST_OP_SIGNATURE(kMatmul, const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                 const MatmulDims& dims, Activation activation)
EST_OP_SIGNATURE(kBiasAdd, const Tensor& x, const Tensor& bias, Tensor& out)
EST_OP_SIGNATURE(kActivation, const Tensor& x, Activation activation, Tensor& y)
EST_OP_SIGNATURE(kActivationGradient, const Tensor& grad, const Tensor& y, Activation activation,
                 Tensor& dx)
EST_OP_SIGNATURE(kBiasGradient, const Tensor& grad, Tensor& out)
EST_OP_SIGNATURE(kConv2D, const Tensor& input, const Tensor& kernel, const Tensor& bias,
                 const Window2D& window, Activation activation, Tensor& output,
                 Tensor* kernel_for_backward)
EST_OP_SIGNATURE(kConv2DBackwardData, const Tensor& grad_pre, const Tensor& kernel,
                 const Tensor& kernel_for_backward, const Window2D& window, Activation activation,
                 bool has_bias, Tensor& grad_input)
EST_OP_SIGNATURE(kConv2DBackwardWeights, const Tensor& input, const Tensor& grad_pre,
                 const Window2D& window, Activation activation, bool has_bias, Tensor& grad_kernel,
                 Tensor* grad_bias)
EST_OP_SIGNATURE(kConv2DWeightsFromOutput, const Tensor& input, const Tensor& grad, const Tensor& y,
                 const Window2D& window, Activation activation, bool has_bias, Tensor& grad_kernel,
                 Tensor* grad_bias)
EST_OP_SIGNATURE(kPool2D, const Tensor& input, const Window2D& window, PoolKind kind, bool training,
                 Tensor& output, Tensor& workspace)
EST_OP_SIGNATURE(kPool2DGradient, const Tensor& grad, const Tensor& workspace,
                 const Window2D& window, PoolKind kind, Tensor& grad_input)
EST_OP_SIGNATURE(kBatchNorm, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                 Tensor& variance, double epsilon, bool training, Tensor& y)
EST_OP_SIGNATURE(kBatchNormGradient, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                 const Tensor& mean, const Tensor& variance, const Tensor& grad, double epsilon,
                 bool training, Tensor* grad_x, Tensor* grad_gamma, Tensor* grad_beta)

EST_OP_SIGNATURE(kApplySgd, std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                 double learning_rate)
EST_OP_SIGNATURE(kApplyMomentum, std::vector<Tensor>& variables,
                 const std::vector<Tensor>& gradients, std::vector<Tensor>& accumulators,
                 double learning_rate, double momentum, bool nesterov)
// step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t), computed by the caller in double.
EST_OP_SIGNATURE(kApplyAdam, std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                 std::vector<Tensor>& m, std::vector<Tensor>& v, double step_size, double beta1,
                 double beta2, double epsilon)
EST_OP_SIGNATURE(kApplyAdagrad, std::vector<Tensor>& variables,
                 const std::vector<Tensor>& gradients, std::vector<Tensor>& accumulators,
                 double learning_rate)
EST_OP_SIGNATURE(kApplyRmsprop, std::vector<Tensor>& variables,
                 const std::vector<Tensor>& gradients, std::vector<Tensor>& mean_square,
                 std::vector<Tensor>& mean_gradient, std::vector<Tensor>& moment,
                 const RmspropParams& params)

#undef EST_OP_SIGNATURE

}  // namespace est::ops
