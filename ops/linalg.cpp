// matmul, linear, bias_add and activate: argument checks, the registry's kernels (kMatmul, whose
// CPU backend OpKind::kMatmul picks, and the bias and activation kernels) and the gradient
// records. Every product is first folded into a MatmulDims (a batched left operand times a
// shared right one becomes one tall GEMM), and gradients are products of the same kind.
#include "ops/linalg.h"

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

void check_operand(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw InvalidArgumentError(fmt::format("{}: {} is undefined", op, what));
  require_floating_dtype(t.dtype(), op);
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const char* what_a,
                      const char* what_b) {
  if (a.dtype() != b.dtype())
    throw InvalidArgumentError(fmt::format("{}: {} is {} but {} is {}; cast one of them", op,
                                           what_a, dtype_name(a.dtype()), what_b,
                                           dtype_name(b.dtype())));
}

// out = activation(op(a) @ op(b) + bias) on the operands' device; out is [batch * M * N].
void run_product(const char* name, const Tensor& a, const Tensor& b, const Tensor& bias,
                 Tensor& out, const MatmulDims& dims, Activation activation) {
  if (out.numel() == 0) return;
  run_kernel<OpId::kMatmul>(name, a.device(), a.dtype(), a, b, bias, out, dims, activation);
}

// The product x @ y (each possibly transposed, x [batch?, rows, inner], y [batch?, inner, cols])
// summed over the batch when the result is not batched: the gradient of a matmul operand.
Tensor gradient_product(const char* name, const Tensor& x, bool x_batched, bool transpose_x,
                        const Tensor& y, bool y_batched, bool transpose_y, int64_t batch,
                        int64_t rows, int64_t cols, int64_t inner, bool result_batched,
                        const Shape& result_shape) {
  MatmulDims dims{.batch = batch,
                  .m = rows,
                  .n = cols,
                  .k = inner,
                  .a_batched = x_batched,
                  .b_batched = y_batched,
                  .transpose_a = transpose_x,
                  .transpose_b = transpose_y};
  if (batch == 1 || result_batched) {
    Tensor result = Tensor::empty(result_shape, x.dtype(), x.device());
    run_product(name, x, y, Tensor(), result, dims, Activation::kNone);
    return result;
  }
  Tensor per_batch = Tensor::empty({batch, rows, cols}, x.dtype(), x.device());
  run_product(name, x, y, Tensor(), per_batch, dims, Activation::kNone);
  return sum(per_batch, {0}).reshape(result_shape);
}

// d(loss)/d(pre-activation) from the gradient of the activation's output y.
Tensor pre_activation_gradient(const Tensor& grad, const Tensor& y, Activation activation) {
  if (activation == Activation::kNone) return grad;
  Tensor result = Tensor::empty(y.shape(), y.dtype(), y.device());
  run_kernel<OpId::kActivationGradient>("activation", y.device(), y.dtype(), grad, y, activation,
                                        result);
  return result;
}

// Per-channel sums of a gradient over every axis but the last.
Tensor bias_gradient(const char* name, const Tensor& grad, int64_t channels) {
  Tensor result = Tensor::empty({channels}, grad.dtype(), grad.device());
  run_kernel<OpId::kBiasGradient>(name, grad.device(), grad.dtype(), grad, result);
  return result;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  check_operand(a, "matmul", "a");
  check_operand(b, "matmul", "b");
  const Device device = common_device("matmul", {&a, &b});
  check_same_dtype(a, b, "matmul", "a", "b");
  if (a.rank() < 2 || b.rank() < 2)
    throw InvalidArgumentError(fmt::format(
        "matmul: both operands need rank 2 or more, got a {} and b {}; reshape a vector to "
        "[1, K] or [K, 1]",
        shape_str(a.shape()), shape_str(b.shape())));
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  const Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  if (!batch_a.empty() && !batch_b.empty() && batch_a != batch_b)
    throw InvalidArgumentError(fmt::format(
        "matmul: batch dimensions differ: a {} has {}, b {} has {}; they must match, or one "
        "operand must have rank 2",
        shape_str(a.shape()), shape_str(batch_a), shape_str(b.shape()), shape_str(batch_b)));
  const int64_t m = transpose_a ? a.dim(-1) : a.dim(-2);
  const int64_t k = transpose_a ? a.dim(-2) : a.dim(-1);
  const int64_t k_b = transpose_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = transpose_b ? b.dim(-2) : b.dim(-1);
  if (k != k_b)
    throw InvalidArgumentError(
        fmt::format("matmul: inner dimensions differ: a {}{} gives K = {} but b {}{} gives K = {}",
                    shape_str(a.shape()), transpose_a ? " (transposed)" : "", k,
                    shape_str(b.shape()), transpose_b ? " (transposed)" : "", k_b));

  Shape out_shape = batch_a.empty() ? batch_b : batch_a;
  out_shape.push_back(m);
  out_shape.push_back(n);
  MatmulDims dims{.batch = num_elements(batch_a.empty() ? batch_b : batch_a),
                  .m = m,
                  .n = n,
                  .k = k,
                  .a_batched = !batch_a.empty(),
                  .b_batched = !batch_b.empty(),
                  .transpose_a = transpose_a,
                  .transpose_b = transpose_b};
  if (dims.a_batched && !dims.b_batched && !transpose_a) {  // one tall GEMM
    dims.m *= dims.batch;
    dims.batch = 1;
    dims.a_batched = false;
  }
  Tensor out = Tensor::empty(out_shape, a.dtype(), device);
  run_product("matmul", a, b, Tensor(), out, dims, Activation::kNone);

  if (!needs_recording({&a, &b})) return out;
  return record(
      out, "matmul", {a, b},
      [a = a.detach(), b = b.detach(), dims](const Tensor& grad,
                                             const NeedsGrad& needs) -> std::vector<Tensor> {
        const bool batched = dims.batch > 1;
        Tensor grad_a, grad_b;
        if (needs[0]) {
          grad_a = dims.transpose_a
                       ? gradient_product("matmul", b, dims.b_batched, dims.transpose_b, grad,
                                          batched, true, dims.batch, dims.k, dims.m, dims.n,
                                          dims.a_batched, a.shape())
                       : gradient_product("matmul", grad, batched, false, b, dims.b_batched,
                                          !dims.transpose_b, dims.batch, dims.m, dims.k, dims.n,
                                          dims.a_batched, a.shape());
        }
        if (needs[1]) {
          grad_b = dims.transpose_b
                       ? gradient_product("matmul", grad, batched, true, a, dims.a_batched,
                                          dims.transpose_a, dims.batch, dims.n, dims.k, dims.m,
                                          dims.b_batched, b.shape())
                       : gradient_product("matmul", a, dims.a_batched, !dims.transpose_a, grad,
                                          batched, false, dims.batch, dims.k, dims.n, dims.m,
                                          dims.b_batched, b.shape());
        }
        return {grad_a, grad_b};
      });
}

Tensor linear(const Tensor& x, const Tensor& kernel, const Tensor& bias, Activation activation) {
  check_operand(x, "linear", "x");
  check_operand(kernel, "linear", "kernel");
  const Device device = common_device("linear", {&x, &kernel, bias.defined() ? &bias : nullptr});
  check_same_dtype(x, kernel, "linear", "x", "kernel");
  if (x.rank() < 2 || kernel.rank() != 2)
    throw InvalidArgumentError(
        fmt::format("linear: expected x [N, in] and kernel [in, out], got x {} and kernel {}",
                    shape_str(x.shape()), shape_str(kernel.shape())));
  const int64_t in = kernel.dim(0), out_features = kernel.dim(1);
  if (x.dim(-1) != in)
    throw InvalidArgumentError(fmt::format("linear: x {} has {} features but kernel {} expects {}",
                                           shape_str(x.shape()), x.dim(-1),
                                           shape_str(kernel.shape()), in));
  if (bias.defined()) {
    check_operand(bias, "linear", "bias");
    check_same_dtype(x, bias, "linear", "x", "bias");
    if (bias.rank() != 1 || bias.dim(0) != out_features)
      throw InvalidArgumentError(
          fmt::format("linear: bias {} does not match kernel {}; expected [{}]",
                      shape_str(bias.shape()), shape_str(kernel.shape()), out_features));
  }
  const int64_t rows = num_elements(Shape(x.shape().begin(), x.shape().end() - 1));
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::empty(out_shape, x.dtype(), device);
  run_product("linear", x, kernel, bias, out, MatmulDims{.m = rows, .n = out_features, .k = in},
              activation);

  if (!needs_recording({&x, &kernel, &bias})) return out;
  return record(out, "linear", {x, kernel, bias},
                [x = x.detach(), kernel = kernel.detach(), y = out.detach(), activation](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  const int64_t in = kernel.dim(0), out_features = kernel.dim(1);
                  const int64_t rows = num_elements(Shape(x.shape().begin(), x.shape().end() - 1));
                  Tensor grad_pre = pre_activation_gradient(grad, y, activation);
                  Tensor grad_x, grad_kernel, grad_bias;
                  if (needs[0])
                    grad_x = gradient_product("linear", grad_pre, false, false, kernel, false, true,
                                              1, rows, in, out_features, false, x.shape());
                  if (needs[1])
                    grad_kernel =
                        gradient_product("linear", x, false, true, grad_pre, false, false, 1, in,
                                         out_features, rows, false, kernel.shape());
                  if (needs[2]) grad_bias = bias_gradient("linear", grad_pre, out_features);
                  return {grad_x, grad_kernel, grad_bias};
                });
}

Tensor bias_add(const Tensor& x, const Tensor& bias) {
  check_operand(x, "bias_add", "x");
  check_operand(bias, "bias_add", "bias");
  const Device device = common_device("bias_add", {&x, &bias});
  check_same_dtype(x, bias, "bias_add", "x", "bias");
  if (x.rank() < 1 || bias.rank() != 1 || bias.dim(0) != x.dim(-1))
    throw InvalidArgumentError(fmt::format(
        "bias_add: bias {} must be a vector with one value per channel of x {} (the last axis)",
        shape_str(bias.shape()), shape_str(x.shape())));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  run_kernel<OpId::kBiasAdd>("bias_add", device, x.dtype(), x, bias, out);
  if (!needs_recording({&x, &bias})) return out;
  return record(
      out, "bias_add", {x, bias},
      [channels = bias.dim(0)](const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
        return {grad, needs[1] ? bias_gradient("bias_add", grad, channels) : Tensor()};
      });
}

Tensor activate(const Tensor& x, Activation activation) {
  if (activation == Activation::kNone) return x;
  check_operand(x, "activate", "x");
  const Device device = common_device("activate", {&x});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  run_kernel<OpId::kActivation>("activate", device, x.dtype(), x, activation, out);
  if (!needs_recording({&x})) return out;
  return record(
      out, "activate", {x},
      [y = out.detach(), activation](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
        return {pre_activation_gradient(grad, y, activation)};
      });
}

}  // namespace est::ops
