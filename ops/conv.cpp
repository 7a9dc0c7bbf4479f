// conv2d, max_pool2d and avg_pool2d: argument checks with TensorFlow's window arithmetic, the
// registry's kernels (OpKind::kConvForward, kConvBackwardData, kConvBackwardWeights and
// kPooling pick their CPU backends) and the gradient records. What backward needs from forward
// is explicit state the forward kernel fills: the kernel in oneDNN's layout, the pooling
// workspace (oneDNN's argmax positions, or the input for the reference). Pooling's backward
// runs on the backend its forward ran on, since only that backend reads its workspace; conv2d's
// backward kernels are looked up when backward runs.
#include "ops/conv.h"

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/cpu/window.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

void check_tensor(const Tensor& t, const char* op, const char* what, int rank, const char* layout) {
  if (!t.defined()) throw InvalidArgumentError(fmt::format("{}: {} is undefined", op, what));
  require_floating_dtype(t.dtype(), op);
  if (t.rank() != rank)
    throw InvalidArgumentError(fmt::format("{}: {} must have rank {} ({}), got shape {}", op, what,
                                           rank, layout, shape_str(t.shape())));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const char* what) {
  if (a.dtype() != b.dtype())
    throw InvalidArgumentError(fmt::format("{}: input is {} but {} is {}; cast one of them", op,
                                           dtype_name(a.dtype()), what, dtype_name(b.dtype())));
}

Shape output_shape(const Window2D& w) { return {w.batch, w.out_h, w.out_w, w.out_c}; }
Shape input_shape(const Window2D& w) { return {w.batch, w.in_h, w.in_w, w.in_c}; }

// The gradients of conv2d from the gradient of its (activated) output.
std::vector<Tensor> conv2d_gradients(const Tensor& grad, const Tensor& input, const Tensor& kernel,
                                     const Tensor& kernel_for_backward, const Tensor& y,
                                     const Window2D& w, Activation activation, bool has_bias,
                                     const NeedsGrad& needs) {
  const Device device = input.device();
  const DType dtype = input.dtype();
  Tensor grad_input, grad_kernel, grad_bias;
  if (needs[1]) grad_kernel = Tensor::empty(kernel.shape(), dtype, device);
  if (needs[2]) grad_bias = Tensor::empty({w.out_c}, dtype, device);
  if (!needs[0] && needs[1]) {  // a first layer: the weights straight from the output gradient
    run_kernel<OpId::kConv2DWeightsFromOutput>("conv2d", device, dtype, input, grad, y, w,
                                               activation, has_bias, grad_kernel,
                                               needs[2] ? &grad_bias : nullptr);
    return {grad_input, grad_kernel, grad_bias};
  }
  Tensor grad_pre = grad;
  if (activation != Activation::kNone) {
    grad_pre = Tensor::empty(y.shape(), dtype, device);
    run_kernel<OpId::kActivationGradient>("conv2d", device, dtype, grad, y, activation, grad_pre);
  }
  if (needs[0]) {
    grad_input = Tensor::empty(input.shape(), dtype, device);
    run_kernel<OpId::kConv2DBackwardData>("conv2d", device, dtype, grad_pre, kernel,
                                          kernel_for_backward, w, activation, has_bias, grad_input);
  }
  if (needs[1])
    run_kernel<OpId::kConv2DBackwardWeights>("conv2d", device, dtype, input, grad_pre, w,
                                             activation, has_bias, grad_kernel,
                                             needs[2] ? &grad_bias : nullptr);
  else if (needs[2])
    run_kernel<OpId::kBiasGradient>("conv2d", device, dtype, grad_pre, grad_bias);
  return {grad_input, grad_kernel, grad_bias};
}

Tensor pool2d(const Tensor& input, const Pool2DParams& params, PoolKind kind) {
  const char* op = kind == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
  check_tensor(input, op, "input", 4, "[N, H, W, C]");
  const Device device = common_device(op, {&input});
  const Window2D w = cpu::make_window(input.shape(), params.window[0], params.window[1],
                                      params.strides, {1, 1}, params.padding, op);
  const bool training = needs_recording({&input});
  Tensor output = Tensor::empty(output_shape(w), input.dtype(), device), workspace;
  const KernelTarget ran = run_kernel<OpId::kPool2D>(op, device, input.dtype(), input, w, kind,
                                                     training, output, workspace);
  if (!training) return output;
  return record(output, op, {input},
                [op, workspace, w, kind, backend = ran.backend](
                    const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor grad_input = Tensor::empty(input_shape(w), grad.dtype(), grad.device());
                  run_kernel_on<OpId::kPool2DGradient>(backend, op, grad.device(), grad.dtype(),
                                                       grad, workspace, w, kind, grad_input);
                  return {grad_input};
                });
}

}  // namespace

int64_t conv_output_size(int64_t input, int64_t window, int stride, int dilation, Padding padding) {
  return cpu::window_dim(input, window, stride, dilation, padding, "conv_output_size").output;
}

Tensor conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias,
              const Conv2DParams& params) {
  check_tensor(input, "conv2d", "input", 4, "[N, H, W, C_in]");
  check_tensor(kernel, "conv2d", "kernel", 4, "[KH, KW, C_in, C_out]");
  check_same_dtype(input, kernel, "conv2d", "kernel");
  if (input.dim(3) != kernel.dim(2))
    throw InvalidArgumentError(
        fmt::format("conv2d: input has {} channels but kernel {} expects {}; kernels are HWIO "
                    "[KH, KW, C_in, C_out] and inputs NHWC",
                    input.dim(3), shape_str(kernel.shape()), kernel.dim(2)));
  const bool has_bias = bias.defined();
  if (has_bias) {
    check_tensor(bias, "conv2d", "bias", 1, "[C_out]");
    check_same_dtype(input, bias, "conv2d", "bias");
    if (bias.dim(0) != kernel.dim(3))
      throw InvalidArgumentError(
          fmt::format("conv2d: bias {} does not match kernel {}; expected [{}]",
                      shape_str(bias.shape()), shape_str(kernel.shape()), kernel.dim(3)));
  }
  const Device device =
      common_device("conv2d", {&input, &kernel, bias.defined() ? &bias : nullptr});
  Window2D w = cpu::make_window(input.shape(), kernel.dim(0), kernel.dim(1), params.strides,
                                params.dilations, params.padding, "conv2d");
  w.out_c = kernel.dim(3);
  const Activation activation = params.activation;
  const bool recording = needs_recording({&input, &kernel, &bias});
  Tensor output = Tensor::empty(output_shape(w), input.dtype(), device), kernel_for_backward;
  run_kernel<OpId::kConv2D>("conv2d", device, input.dtype(), input, kernel, bias, w, activation,
                            output, recording ? &kernel_for_backward : nullptr);
  if (!recording) return output;
  return record(output, "conv2d", {input, kernel, bias},
                [input = input.detach(), kernel = kernel.detach(), kernel_for_backward,
                 y = activation == Activation::kNone ? Tensor() : output.detach(), w, activation,
                 has_bias](const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  return conv2d_gradients(grad, input, kernel, kernel_for_backward, y, w,
                                          activation, has_bias, needs);
                });
}

Tensor max_pool2d(const Tensor& input, const Pool2DParams& params) {
  return pool2d(input, params, PoolKind::kMax);
}

Tensor avg_pool2d(const Tensor& input, const Pool2DParams& params) {
  return pool2d(input, params, PoolKind::kAverage);
}

}  // namespace est::ops
