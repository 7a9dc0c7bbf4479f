// The CUDA kernels of the registry ops (see ops/kernel_ops.h for what each computes),
// registered by ops/cuda/register.cpp, grouped by the file that implements them.
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
// One reduction pass, `in` [outer, r, inner] -> `out` [outer, inner], laid out by
// ops/cuda/reduce_plan.h (the rows split across blocks when the columns are few: the conv
// bias gradient).
void reduce_axis(ReduceOp op, const Tensor& in, Tensor& out, int64_t outer, int64_t r,
                 int64_t inner);

// matmul.cpp
void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulDims& dims, Activation activation);
// cuBLAS handles made so far by the process's pool (all GPUs): threads that end give theirs
// back for the next ones (ops/cuda/handle_pool.h).
int64_t cublas_handles_created();

// layout_kernels.cpp
void transpose(const Tensor& x, const std::vector<int>& perm, Tensor& out);
void concat(const std::vector<Tensor>& inputs, int axis, Tensor& out);
void slice(const Tensor& x, const std::vector<int64_t>& begin, Tensor& out);
void slice_gradient(const Tensor& grad, const std::vector<int64_t>& begin, Tensor& dx);
void gather(const Tensor& params, const Tensor& indices, int axis, Tensor& out);
void gather_gradient(const Tensor& grad, const Tensor& indices, int axis, Tensor& dparams);
void one_hot(const Tensor& indices, double on_value, double off_value, Tensor& out);

// softmax_loss_kernels.cpp
void dropout_mask(double rate, Generator& generator, Tensor& mask);
void softmax(const Tensor& x, int axis, bool log, Tensor& y);
void softmax_gradient(const Tensor& grad, const Tensor& y, int axis, bool log, Tensor& dx);
void sparse_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs);
void sparse_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& probs,
                                   Tensor& dlogits);
void cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs,
                   Tensor& lse);
void cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                            const Tensor& probs, const Tensor& lse, Tensor* dlabels,
                            Tensor* dlogits);
void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss);
void sigmoid_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                                    Tensor* dlabels, Tensor* dlogits);
// conv.cpp: convolution through cuDNN (the window's asymmetric SAME padding made explicit).
void conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias, const Window2D& window,
            Activation activation, Tensor& output, Tensor* kernel_for_backward);
void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& kernel_for_backward, const Window2D& window,
                          Activation activation, bool has_bias, Tensor& grad_input);
void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre, const Window2D& window,
                             Activation activation, bool has_bias, Tensor& grad_kernel,
                             Tensor* grad_bias);
void conv2d_weights_from_output(const Tensor& input, const Tensor& grad, const Tensor& y,
                                const Window2D& window, Activation activation, bool has_bias,
                                Tensor& grad_kernel, Tensor* grad_bias);

// pool.cpp
void pool2d(const Tensor& input, const Window2D& window, PoolKind kind, bool training,
            Tensor& output, Tensor& workspace);
void pool2d_gradient(const Tensor& grad, const Tensor& workspace, const Window2D& window,
                     PoolKind kind, Tensor& grad_input);

// batch_norm.cpp
void batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                Tensor& variance, double epsilon, bool training, Tensor& y);
void batch_norm_gradient(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta);

// optimizer.cpp: the fused optimizer updates, one launch per step (optimizer.cu).
void apply_sgd(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
               double learning_rate);
void apply_momentum(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                    std::vector<Tensor>& accumulators, double learning_rate, double momentum,
                    bool nesterov);
void apply_adam(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                std::vector<Tensor>& m, std::vector<Tensor>& v, double step_size, double beta1,
                double beta2, double epsilon);
void apply_adagrad(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& accumulators, double learning_rate);
void apply_rmsprop(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& mean_square, std::vector<Tensor>& mean_gradient,
                   std::vector<Tensor>& moment, const RmspropParams& params);

}  // namespace est::ops::cuda
