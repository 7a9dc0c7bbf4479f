// The oneDNN backend's entries in the kernel registry: float32 and bfloat16 kernels for the
// activations, softmax, matmul/linear, conv2d, pooling and batch norm, adapted to
// ops/kernel_ops.h.
//
// What oneDNN lacks is declined with an UnimplementedError, on which the registry runs the
// reference kernel: empty tensors, unary ops without an eltwise primitive (neg, square, clip,
// pow), softmax over another axis than the last. conv2d's weight gradient from the
// activation's output uses the fused first-layer kernel of ops/cpu/conv_kernel_gradient.h
// where it applies: that loop is this backend's choice for the case (it beats oneDNN's
// primitive there), and oneDNN's primitive otherwise.
#include <optional>

#include "ops/cpu/bias_activation.h"
#include "ops/cpu/conv_kernel_gradient.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/via_float.h"
#include "ops/onednn/kernels.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

constexpr KernelTarget kOneDnn{DeviceType::kCPU, Backend::kOneDnn};

[[noreturn]] void decline(const char* what) {
  throw UnimplementedError(std::string("oneDNN has no kernel for ") + what);
}

void require_nonempty(const Tensor& t, const char* what) {
  if (t.numel() == 0) decline(what);
}

std::optional<onednn::Eltwise> eltwise_of(UnaryOp op) {
  using onednn::Eltwise;
  switch (op) {
    case UnaryOp::kRelu:
      return Eltwise::kRelu;
    case UnaryOp::kSigmoid:
      return Eltwise::kSigmoid;
    case UnaryOp::kTanh:
      return Eltwise::kTanh;
    case UnaryOp::kExp:
      return Eltwise::kExp;
    case UnaryOp::kLog:
      return Eltwise::kLog;
    case UnaryOp::kSqrt:
      return Eltwise::kSqrt;
    case UnaryOp::kAbs:
      return Eltwise::kAbs;
    default:
      return std::nullopt;
  }
}

void unary(UnaryOp op, const UnaryParams&, const Tensor& x, Tensor& y) {
  const std::optional<onednn::Eltwise> kind = eltwise_of(op);
  if (!kind) decline("this unary op");
  require_nonempty(x, "an empty tensor");
  onednn::eltwise_forward(*kind, x, y);
}

void unary_gradient(UnaryOp op, const UnaryParams&, const Tensor& grad, const Tensor& saved,
                    Tensor& dx) {
  const std::optional<onednn::Eltwise> kind = eltwise_of(op);
  if (!kind) decline("this unary op");
  require_nonempty(saved, "an empty tensor");
  onednn::eltwise_backward(*kind, grad, saved, dx);
}

void require_last_axis(const Tensor& t, int axis) {
  if (t.rank() == 0 || axis != t.rank() - 1) decline("softmax over another axis than the last");
  require_nonempty(t, "an empty tensor");
}

void softmax(const Tensor& x, int axis, bool log, Tensor& y) {
  require_last_axis(x, axis);
  onednn::softmax_forward(x, log, y);
}

void softmax_gradient(const Tensor& grad, const Tensor& y, int axis, bool log, Tensor& dx) {
  require_last_axis(y, axis);
  onednn::softmax_backward(grad, y, log, dx);
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulDims& dims, Activation activation) {
  if (out.numel() == 0 || dims.k == 0) decline("an empty product");
  if (out.dtype() == DType::kBF16 && !cpu::has_avx512_core())
    decline("bfloat16 on a CPU without AVX-512 (avx512_core)");
  onednn::matmul(a, b, bias, out, dims, activation);
}

bool empty_window(const Window2D& w, const Tensor& kernel) {
  return w.batch * w.out_h * w.out_w * w.out_c == 0 || kernel.numel() == 0;
}

void conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias, const Window2D& w,
            Activation activation, Tensor& output, Tensor* kernel_for_backward) {
  if (empty_window(w, kernel)) decline("an empty convolution");
  onednn::conv2d_forward(input, kernel, bias, w, activation, output, kernel_for_backward);
}

void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& kernel_for_backward, const Window2D& w,
                          Activation activation, bool has_bias, Tensor& grad_input) {
  if (empty_window(w, kernel)) decline("an empty convolution");
  onednn::conv2d_backward_data(grad_pre, kernel, kernel_for_backward, w, activation, has_bias,
                               grad_input);
}

void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre, const Window2D& w,
                             Activation activation, bool has_bias, Tensor& grad_kernel,
                             Tensor* grad_bias) {
  if (empty_window(w, grad_kernel)) decline("an empty convolution");
  onednn::conv2d_backward_weights(input, grad_pre, w, activation, has_bias, grad_kernel, grad_bias);
}

void conv2d_weights_from_output(const Tensor& input, const Tensor& grad, const Tensor& y,
                                const Window2D& w, Activation activation, bool has_bias,
                                Tensor& grad_kernel, Tensor* grad_bias) {
  if (empty_window(w, grad_kernel)) decline("an empty convolution");
  if (cpu::fused_kernel_gradient_supported(w)) {
    cpu::conv2d_kernel_gradient_fused(input, grad, y, activation, w, grad_kernel, grad_bias);
    return;
  }
  Tensor grad_pre = grad;
  if (activation != Activation::kNone) {
    grad_pre = Tensor::empty(y.shape(), y.dtype());
    cpu::activation_backward(grad, y, grad_pre, activation);
  }
  onednn::conv2d_backward_weights(input, grad_pre, w, activation, has_bias, grad_kernel, grad_bias);
}

void pool2d(const Tensor& input, const Window2D& w, PoolKind kind, bool training, Tensor& output,
            Tensor& workspace) {
  require_nonempty(input, "an empty tensor");
  require_nonempty(output, "an empty tensor");
  onednn::pool2d_forward(input, w, kind, training, output, workspace);
}

void pool2d_gradient(const Tensor& grad, const Tensor& workspace, const Window2D& w, PoolKind kind,
                     Tensor& grad_input) {
  onednn::pool2d_backward(grad, workspace, w, kind, grad_input);
}

void batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                Tensor& variance, double epsilon, bool training, Tensor& y) {
  require_nonempty(x, "an empty tensor");
  onednn::batch_norm_forward(x, gamma, beta, mean, variance, epsilon, training, y);
}

void batch_norm_gradient(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta) {
  require_nonempty(x, "an empty tensor");
  onednn::batch_norm_backward(x, gamma, beta, mean, variance, grad, epsilon, training, grad_x,
                              grad_gamma, grad_beta);
}

}  // namespace

// bfloat16: matmul natively (bf16 operands, f32 accumulation, where the CPU has avx512_core);
// the other kernels run their float32 primitives through via_float (widened inputs, each
// output rounded once: the reference's semantics at oneDNN's speed, plus the conversions).
void register_onednn_kernels(KernelRegistry& registry) {
  const DTypes dtypes{DType::kF32, DType::kBF16};
  using cpu::via_float;  // (static_cast: ops::conv2d and the others overload these names)
  registry.add<OpId::kUnary>(kOneDnn, via_float<static_cast<KernelFn<OpId::kUnary>>(unary)>,
                             dtypes);
  registry.add<OpId::kUnaryGradient>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kUnaryGradient>>(unary_gradient)>, dtypes);
  registry.add<OpId::kSoftmax>(kOneDnn, via_float<static_cast<KernelFn<OpId::kSoftmax>>(softmax)>,
                               dtypes);
  registry.add<OpId::kSoftmaxGradient>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kSoftmaxGradient>>(softmax_gradient)>, dtypes);
  registry.add<OpId::kMatmul>(kOneDnn, matmul, dtypes);
  registry.add<OpId::kConv2D>(kOneDnn, via_float<static_cast<KernelFn<OpId::kConv2D>>(conv2d)>,
                              dtypes);
  registry.add<OpId::kConv2DBackwardData>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kConv2DBackwardData>>(conv2d_backward_data)>,
      dtypes);
  registry.add<OpId::kConv2DBackwardWeights>(
      kOneDnn,
      via_float<static_cast<KernelFn<OpId::kConv2DBackwardWeights>>(conv2d_backward_weights)>,
      dtypes);
  registry.add<OpId::kConv2DWeightsFromOutput>(
      kOneDnn,
      via_float<static_cast<KernelFn<OpId::kConv2DWeightsFromOutput>>(conv2d_weights_from_output)>,
      dtypes);
  registry.add<OpId::kPool2D>(kOneDnn, via_float<static_cast<KernelFn<OpId::kPool2D>>(pool2d)>,
                              dtypes);
  registry.add<OpId::kPool2DGradient>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kPool2DGradient>>(pool2d_gradient)>, dtypes);
  registry.add<OpId::kBatchNorm>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kBatchNorm>>(batch_norm)>, dtypes);
  registry.add<OpId::kBatchNormGradient>(
      kOneDnn, via_float<static_cast<KernelFn<OpId::kBatchNormGradient>>(batch_norm_gradient)>,
      dtypes);
}

}  // namespace est::ops
