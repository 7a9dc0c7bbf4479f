// The list of registry ops: the one place an op of the kernel registry is written down. Every
// other per-op table is generated from it (an X-macro, as ggml's GGML_OP list and LLVM's .def
// files are): the OpId enum and each op's kernel signature (ops/kernel_ops.h), op_info's name
// and CPU op kind (ops/registry.cpp), the reference kernels' declarations (ops/cpu/kernels.h)
// and registration (ops/cpu/register.cpp), the CUDA kernels' declarations (ops/cuda/kernels.h)
// and the export tracer's walk over a kernel's arguments (export/trace.cpp).
//
// One entry per op: X(ID, NAME, KIND, REFERENCE, kernel parameters...)
//   ID         the OpId enumerator (kOneHot);
//   NAME       the op's name in logs and errors ("one_hot"), and the name of its kernel function
//              in every backend's namespace (cpu::one_hot, cuda::one_hot);
//   KIND       the OpKind whose backend table (ops/backend_table.h) picks its CPU backend, or
//              kNone: the reference runs it on the CPU unless a BackendGuard asks for another;
//   REFERENCE  how the reference kernel meets the dtypes: kNative (it handles every dtype,
//              bfloat16 included), kViaFloat (bfloat16 computed in float32 through
//              ops/cpu/via_float.h), kFloat (float32 and float64 only: the fused updates);
//   then the kernel's parameters, outputs as `Tensor&` / `Tensor*` (kernel_ops.h says more).
// Adding an op: docs/design.md, "Adding an op".
#pragma once

// clang-format off
#define EST_REGISTRY_OPS(X)                                                                     \
  /* Creation and copies. */                                                                    \
  X(kFill, fill, kNone, kNative, Tensor& out, double value)                                     \
  /* same shape and dtype; devices may differ (see copy_to) */                                  \
  X(kCopy, copy, kNone, kNative, const Tensor& source, Tensor& target)                          \
  /* out has another dtype */                                                                   \
  X(kCast, cast, kNone, kNative, const Tensor& x, Tensor& out)                                  \
  /* Elementwise: a and b broadcast to out's shape. */                                          \
  X(kBinary, binary, kNone, kViaFloat, BinaryOp op, const Tensor& a, const Tensor& b,           \
    Tensor& out)                                                                                \
  /* d(op)/d(input 0 or 1) * grad, in grad's shape */                                           \
  X(kBinaryGradient, binary_gradient, kNone, kViaFloat, BinaryOp op, int input,                 \
    const Tensor& grad, const Tensor& a, const Tensor& b, Tensor& out)                          \
  /* out is bool, broadcasting */                                                               \
  X(kCompare, compare, kNone, kNative, CompareOp op, const Tensor& a, const Tensor& b,          \
    Tensor& out)                                                                                \
  X(kUnary, unary, kEltwise, kViaFloat, UnaryOp op, const UnaryParams& params, const Tensor& x, \
    Tensor& y)                                                                                  \
  /* saved is x or y, as unary_saves_output(op) says */                                         \
  X(kUnaryGradient, unary_gradient, kEltwise, kViaFloat, UnaryOp op, const UnaryParams& params, \
    const Tensor& grad, const Tensor& saved, Tensor& dx)                                        \
  /* target += alpha * x in place */                                                            \
  X(kAddScaled, add_scaled, kNone, kViaFloat, Tensor& target, const Tensor& x, double alpha)    \
  X(kBroadcastTo, broadcast_to, kNone, kNative, const Tensor& x, Tensor& out)                   \
  /* Reductions: axes normalised and sorted; out has them removed. */                           \
  X(kReduce, reduce, kNone, kViaFloat, ReduceOp op, const Tensor& x,                            \
    const std::vector<int>& axes, Tensor& out)                                                  \
  /* out is int64 */                                                                            \
  X(kArgmax, argmax, kNone, kNative, const Tensor& x, int axis, Tensor& out)                    \
  /* Layout and indexing. */                                                                    \
  X(kTranspose, transpose, kNone, kNative, const Tensor& x, const std::vector<int>& perm,       \
    Tensor& out)                                                                                \
  X(kConcat, concat, kNone, kNative, const std::vector<Tensor>& inputs, int axis, Tensor& out)  \
  /* out's shape is the window's size */                                                        \
  X(kSlice, slice, kNone, kNative, const Tensor& x, const std::vector<int64_t>& begin,          \
    Tensor& out)                                                                                \
  /* grad written into the window, zeros elsewhere */                                           \
  X(kSliceGradient, slice_gradient, kNone, kNative, const Tensor& grad,                         \
    const std::vector<int64_t>& begin, Tensor& dx)                                              \
  /* indices checked: an id out of range throws */                                              \
  X(kGather, gather, kNone, kNative, const Tensor& params, const Tensor& indices, int axis,     \
    Tensor& out)                                                                                \
  /* scatter-add into zeros */                                                                  \
  X(kGatherGradient, gather_gradient, kNone, kViaFloat, const Tensor& grad,                     \
    const Tensor& indices, int axis, Tensor& dparams)                                           \
  X(kOneHot, one_hot, kNone, kNative, const Tensor& indices, double on_value, double off_value, \
    Tensor& out)                                                                                \
  /* 0 or 1 / (1 - rate) per element */                                                         \
  X(kDropoutMask, dropout_mask, kNone, kViaFloat, double rate, Generator& generator,            \
    Tensor& mask)                                                                               \
  /* Softmax and losses. */                                                                     \
  X(kSoftmax, softmax, kSoftmax, kViaFloat, const Tensor& x, int axis, bool log, Tensor& y)     \
  X(kSoftmaxGradient, softmax_gradient, kSoftmax, kViaFloat, const Tensor& grad,                \
    const Tensor& y, int axis, bool log, Tensor& dx)                                            \
  X(kSparseCrossEntropy, sparse_cross_entropy, kNone, kViaFloat, const Tensor& labels,          \
    const Tensor& logits, Tensor& loss, Tensor& probs)                                          \
  X(kSparseCrossEntropyGradient, sparse_cross_entropy_gradient, kNone, kViaFloat,               \
    const Tensor& grad, const Tensor& labels, const Tensor& probs, Tensor& dlogits)             \
  X(kCrossEntropy, cross_entropy, kNone, kViaFloat, const Tensor& labels, const Tensor& logits, \
    Tensor& loss, Tensor& probs, Tensor& lse)                                                   \
  X(kCrossEntropyGradient, cross_entropy_gradient, kNone, kViaFloat, const Tensor& grad,        \
    const Tensor& labels, const Tensor& logits, const Tensor& probs, const Tensor& lse,         \
    Tensor* dlabels, Tensor* dlogits)                                                           \
  X(kSigmoidCrossEntropy, sigmoid_cross_entropy, kNone, kViaFloat, const Tensor& labels,        \
    const Tensor& logits, Tensor& loss)                                                         \
  X(kSigmoidCrossEntropyGradient, sigmoid_cross_entropy_gradient, kNone, kViaFloat,             \
    const Tensor& grad, const Tensor& labels, const Tensor& logits, Tensor* dlabels,            \
    Tensor* dlogits)                                                                            \
  /* Dense layers: activation(op(a) @ op(b) + bias). */                                         \
  X(kMatmul, matmul, kMatmul, kViaFloat, const Tensor& a, const Tensor& b, const Tensor& bias,  \
    Tensor& out, const MatmulDims& dims, Activation activation)                                 \
  X(kBiasAdd, bias_add, kNone, kViaFloat, const Tensor& x, const Tensor& bias, Tensor& out)     \
  X(kActivation, activation, kNone, kViaFloat, const Tensor& x, Activation activation,          \
    Tensor& y)                                                                                  \
  /* from the activation's output y */                                                          \
  X(kActivationGradient, activation_gradient, kNone, kViaFloat, const Tensor& grad,             \
    const Tensor& y, Activation activation, Tensor& dx)                                         \
  /* sums over every axis but the last */                                                       \
  X(kBiasGradient, bias_gradient, kNone, kViaFloat, const Tensor& grad, Tensor& out)            \
  /* Convolution, pooling, batch norm. */                                                       \
  X(kConv2D, conv2d, kConvForward, kViaFloat, const Tensor& input, const Tensor& kernel,        \
    const Tensor& bias, const Window2D& window, Activation activation, Tensor& output,          \
    Tensor* kernel_for_backward)                                                                \
  X(kConv2DBackwardData, conv2d_backward_data, kConvBackwardData, kViaFloat,                    \
    const Tensor& grad_pre, const Tensor& kernel, const Tensor& kernel_for_backward,            \
    const Window2D& window, Activation activation, bool has_bias, Tensor& grad_input)           \
  X(kConv2DBackwardWeights, conv2d_backward_weights, kConvBackwardWeights, kViaFloat,           \
    const Tensor& input, const Tensor& grad_pre, const Window2D& window, Activation activation, \
    bool has_bias, Tensor& grad_kernel, Tensor* grad_bias)                                      \
  X(kConv2DWeightsFromOutput, conv2d_weights_from_output, kConvBackwardWeights, kViaFloat,      \
    const Tensor& input, const Tensor& grad, const Tensor& y, const Window2D& window,            \
    Activation activation, bool has_bias, Tensor& grad_kernel, Tensor* grad_bias)               \
  X(kPool2D, pool2d, kPooling, kViaFloat, const Tensor& input, const Window2D& window,           \
    PoolKind kind, bool training, Tensor& output, Tensor& workspace)                            \
  X(kPool2DGradient, pool2d_gradient, kPooling, kViaFloat, const Tensor& grad,                  \
    const Tensor& workspace, const Window2D& window, PoolKind kind, Tensor& grad_input)         \
  X(kBatchNorm, batch_norm, kBatchNorm, kViaFloat, const Tensor& x, const Tensor& gamma,        \
    const Tensor& beta, Tensor& mean, Tensor& variance, double epsilon, bool training,          \
    Tensor& y)                                                                                  \
  X(kBatchNormGradient, batch_norm_gradient, kBatchNorm, kViaFloat, const Tensor& x,            \
    const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& variance,        \
    const Tensor& grad, double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,      \
    Tensor* grad_beta)                                                                          \
  /* Fused optimizer updates (TF1's training ops): every variable of a step in one call, in */  \
  /* place, each list one tensor per variable (same shape and dtype, one device). The */        \
  /* formulas and their float operation order are nn/optimizers.h's, scalars rounded to the */  \
  /* dtype first. */                                                                            \
  /* var -= lr * g (as kAddScaled with -lr) */                                                  \
  X(kApplySgd, apply_sgd, kNone, kFloat, std::vector<Tensor>& variables,                        \
    const std::vector<Tensor>& gradients, double learning_rate)                                 \
  X(kApplyMomentum, apply_momentum, kNone, kFloat, std::vector<Tensor>& variables,              \
    const std::vector<Tensor>& gradients, std::vector<Tensor>& accumulators,                    \
    double learning_rate, double momentum, bool nesterov)                                       \
  /* step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t), computed by the caller in double */    \
  X(kApplyAdam, apply_adam, kNone, kFloat, std::vector<Tensor>& variables,                      \
    const std::vector<Tensor>& gradients, std::vector<Tensor>& m, std::vector<Tensor>& v,       \
    double step_size, double beta1, double beta2, double epsilon)                               \
  X(kApplyAdagrad, apply_adagrad, kNone, kFloat, std::vector<Tensor>& variables,                \
    const std::vector<Tensor>& gradients, std::vector<Tensor>& accumulators,                    \
    double learning_rate)                                                                       \
  /* mean_gradient is empty unless params.centered */                                           \
  X(kApplyRmsprop, apply_rmsprop, kNone, kFloat, std::vector<Tensor>& variables,                \
    const std::vector<Tensor>& gradients, std::vector<Tensor>& mean_square,                     \
    std::vector<Tensor>& mean_gradient, std::vector<Tensor>& moment,                            \
    const RmspropParams& params)
// clang-format on
