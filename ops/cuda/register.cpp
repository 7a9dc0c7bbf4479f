// The CUDA backend's entries in the kernel registry (gpu/cuda), one for every registry op: copies,
// fill and cast, the elementwise families, reductions, layout and indexing, softmax and the
// losses, dropout, a dense layer (cuBLAS), convolution (cuDNN, with direct kernels where cuDNN
// has no algorithm), pooling and batch norm (own kernels that match the reference exactly).
// An op or dtype missing here fails on a GPU tensor with the registry's error naming the op,
// the device and where the op has kernels, never a silent trip through host memory.
#include "ops/cuda/kernels.h"
#include "ops/registry.h"

namespace est::ops {

void register_cuda_kernels(KernelRegistry& registry) {
  constexpr KernelTarget kCuda{DeviceType::kCUDA, Backend::kCuda};
  const DTypes floating{DType::kF32, DType::kF64};
  const DTypes numeric{DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8};
  auto& r = registry;
  r.add<OpId::kFill>(kCuda, cuda::fill);
  r.add<OpId::kCopy>(kCuda, cuda::copy);
  r.add<OpId::kCast>(kCuda, cuda::cast);
  r.add<OpId::kBinary>(kCuda, cuda::binary, numeric);
  r.add<OpId::kBinaryGradient>(kCuda, cuda::binary_gradient, floating);
  r.add<OpId::kCompare>(kCuda, cuda::compare);
  r.add<OpId::kUnary>(kCuda, cuda::unary, {DType::kF32, DType::kF64, DType::kI32, DType::kI64});
  r.add<OpId::kUnaryGradient>(kCuda, cuda::unary_gradient, floating);
  r.add<OpId::kAddScaled>(kCuda, cuda::add_scaled, floating);
  r.add<OpId::kBroadcastTo>(kCuda, cuda::broadcast_to);
  r.add<OpId::kReduce>(kCuda, cuda::reduce, numeric);
  r.add<OpId::kArgmax>(kCuda, cuda::argmax, numeric);
  r.add<OpId::kMatmul>(kCuda, cuda::matmul, floating);
  r.add<OpId::kBiasAdd>(kCuda, cuda::bias_add, floating);
  r.add<OpId::kActivation>(kCuda, cuda::activate, floating);
  r.add<OpId::kActivationGradient>(kCuda, cuda::activation_gradient, floating);
  r.add<OpId::kBiasGradient>(kCuda, cuda::bias_gradient, floating);
  // Layout and indexing (layout_kernels.cpp): layout ops move bytes, so every dtype of the
  // reference; gather by params' dtype, one_hot by the indices' (any output dtype).
  const DTypes every{DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBool};
  r.add<OpId::kTranspose>(kCuda, cuda::transpose, every);
  r.add<OpId::kConcat>(kCuda, cuda::concat, every);
  r.add<OpId::kSlice>(kCuda, cuda::slice, every);
  r.add<OpId::kSliceGradient>(kCuda, cuda::slice_gradient, every);
  r.add<OpId::kGather>(kCuda, cuda::gather, every);
  r.add<OpId::kGatherGradient>(kCuda, cuda::gather_gradient, floating);
  r.add<OpId::kOneHot>(kCuda, cuda::one_hot, {DType::kI32, DType::kI64});
  // Softmax, the losses and dropout's mask (softmax_loss_kernels.cpp).
  r.add<OpId::kDropoutMask>(kCuda, cuda::dropout_mask, floating);
  r.add<OpId::kSoftmax>(kCuda, cuda::softmax, floating);
  r.add<OpId::kSoftmaxGradient>(kCuda, cuda::softmax_gradient, floating);
  r.add<OpId::kSparseCrossEntropy>(kCuda, cuda::sparse_cross_entropy, floating);
  r.add<OpId::kSparseCrossEntropyGradient>(kCuda, cuda::sparse_cross_entropy_gradient, floating);
  r.add<OpId::kCrossEntropy>(kCuda, cuda::cross_entropy, floating);
  r.add<OpId::kCrossEntropyGradient>(kCuda, cuda::cross_entropy_gradient, floating);
  r.add<OpId::kSigmoidCrossEntropy>(kCuda, cuda::sigmoid_cross_entropy, floating);
  r.add<OpId::kSigmoidCrossEntropyGradient>(kCuda, cuda::sigmoid_cross_entropy_gradient, floating);
  // Convolution (cuDNN), pooling and batch norm; cudnn_types() says which dtypes cuDNN has.
  const DTypes conv_dtypes{DType::kF32, DType::kF64};
  r.add<OpId::kConv2D>(kCuda, cuda::conv2d, conv_dtypes);
  r.add<OpId::kConv2DBackwardData>(kCuda, cuda::conv2d_backward_data, conv_dtypes);
  r.add<OpId::kConv2DBackwardWeights>(kCuda, cuda::conv2d_backward_weights, conv_dtypes);
  r.add<OpId::kConv2DWeightsFromOutput>(kCuda, cuda::conv2d_weights_from_output, conv_dtypes);
  r.add<OpId::kPool2D>(kCuda, cuda::pool2d, floating);
  r.add<OpId::kPool2DGradient>(kCuda, cuda::pool2d_gradient, floating);
  r.add<OpId::kBatchNorm>(kCuda, cuda::batch_norm, floating);
  r.add<OpId::kBatchNormGradient>(kCuda, cuda::batch_norm_gradient, floating);
  r.add<OpId::kApplySgd>(kCuda, cuda::apply_sgd, floating);
  r.add<OpId::kApplyMomentum>(kCuda, cuda::apply_momentum, floating);
  r.add<OpId::kApplyAdam>(kCuda, cuda::apply_adam, floating);
  r.add<OpId::kApplyAdagrad>(kCuda, cuda::apply_adagrad, floating);
  r.add<OpId::kApplyRmsprop>(kCuda, cuda::apply_rmsprop, floating);
}

}  // namespace est::ops
