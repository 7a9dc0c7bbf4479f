// Reference kernels of the layers: matmul with its fused bias and activation, bias and
// activation on their own, conv2d and its gradients, pooling and batch norm. Thin adapters from
// the registry's signatures to the Eigen/loop kernels of matmul_reference.h, conv_reference.h,
// pool_reference.h, batch_norm_reference.h and bias_activation.h.
#include "ops/cpu/batch_norm_reference.h"
#include "ops/cpu/bias_activation.h"
#include "ops/cpu/conv_reference.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/pool_reference.h"

namespace est::ops::cpu {

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulDims& dims, Activation activation) {
  if (out.numel() == 0) return;
  if (dims.k == 0)
    fill(out, 0.0);  // an empty sum
  else
    matmul_reference(a, b, out, dims);
  if (bias.defined()) add_bias_inplace(out, bias);
  activate_inplace(out, activation);
}

void bias_add(const Tensor& x, const Tensor& bias, Tensor& out) {
  copy(x, out);
  add_bias_inplace(out, bias);
}

void activation(const Tensor& x, Activation activation, Tensor& y) {
  copy(x, y);
  activate_inplace(y, activation);
}

void activation_gradient(const Tensor& grad, const Tensor& y, Activation activation, Tensor& dx) {
  activation_backward(grad, y, dx, activation);
}

void bias_gradient(const Tensor& grad, Tensor& out) { column_sums(grad, out); }

void conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias, const Window2D& window,
            Activation activation, Tensor& output, Tensor* /*kernel_for_backward*/) {
  conv2d_forward_reference(input, kernel, output, window);
  if (bias.defined()) add_bias_inplace(output, bias);
  activate_inplace(output, activation);
}

void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& /*kernel_for_backward*/, const Window2D& window,
                          Activation /*activation*/, bool /*has_bias*/, Tensor& grad_input) {
  conv2d_backward_data_reference(grad_pre, kernel, grad_input, window);
}

void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre, const Window2D& window,
                             Activation /*activation*/, bool /*has_bias*/, Tensor& grad_kernel,
                             Tensor* grad_bias) {
  conv2d_backward_kernel_reference(input, grad_pre, grad_kernel, window);
  if (grad_bias != nullptr) column_sums(grad_pre, *grad_bias);
}

void conv2d_weights_from_output(const Tensor& input, const Tensor& grad, const Tensor& y,
                                const Window2D& window, Activation activation, bool has_bias,
                                Tensor& grad_kernel, Tensor* grad_bias) {
  Tensor grad_pre = grad;
  if (activation != Activation::kNone) {
    grad_pre = Tensor::empty(y.shape(), y.dtype());
    activation_backward(grad, y, grad_pre, activation);
  }
  conv2d_backward_weights(input, grad_pre, window, activation, has_bias, grad_kernel, grad_bias);
}

// Max pooling's gradient re-finds each maximum in the input, which is its workspace here;
// average pooling needs none.
void pool2d(const Tensor& input, const Window2D& window, PoolKind kind, bool training,
            Tensor& output, Tensor& workspace) {
  pool2d_forward_reference(input, output, window, kind);
  if (training && kind == PoolKind::kMax) workspace = input.detach();
}

void pool2d_gradient(const Tensor& grad, const Tensor& workspace, const Window2D& window,
                     PoolKind kind, Tensor& grad_input) {
  pool2d_backward_reference(workspace, grad, grad_input, window, kind);
}

void batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                Tensor& variance, double epsilon, bool training, Tensor& y) {
  if (training) batch_norm_statistics_reference(x, mean, variance);
  batch_norm_forward_reference(x, gamma, beta, mean, variance, epsilon, y);
}

void batch_norm_gradient(const Tensor& x, const Tensor& gamma, const Tensor& /*beta*/,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta) {
  batch_norm_backward_reference(x, gamma, mean, variance, grad, epsilon, training, grad_x,
                                grad_gamma, grad_beta);
}

}  // namespace est::ops::cpu
