// The CUDA backend's entries in the kernel registry (gpu/cuda), one for every registry op: copies,
// fill and cast, the elementwise families, reductions, layout and indexing, softmax and the
// losses, dropout, a dense layer (cuBLAS), convolution (cuDNN, with direct kernels where cuDNN
// has no algorithm), pooling and batch norm (own kernels that match the reference exactly).
// An op or dtype missing here fails on a GPU tensor with the registry's error naming the op,
// the device and where the op has kernels, never a silent trip through host memory.
// bfloat16: fill, cast, copy, broadcast_to, the layout ops and gather (they move 16-bit
// elements) and matmul (cuBLAS, float32 accumulation) are native; every other kernel computes
// it in float32 through via_float with the CUDA cast (each output rounded once, as the
// reference's).
#include "ops/cpu/via_float.h"
#include "ops/cuda/kernels.h"
#include "ops/registry.h"

namespace est::ops {

void register_cuda_kernels(KernelRegistry& registry) {
  constexpr KernelTarget kCuda{DeviceType::kCUDA, Backend::kCuda};
  const DTypes floating{DType::kF32, DType::kF64, DType::kBF16};
  const DTypes numeric{DType::kF32, DType::kF64, DType::kI32,
                       DType::kI64, DType::kU8,  DType::kBF16};
  auto& r = registry;
  r.add<OpId::kFill>(kCuda, cuda::fill);
  r.add<OpId::kCopy>(kCuda, cuda::copy);
  r.add<OpId::kCast>(kCuda, cuda::cast);
  r.add<OpId::kBinary>(kCuda, cpu::via_float<cuda::binary, cuda::cast>, numeric);
  r.add<OpId::kBinaryGradient>(kCuda, cpu::via_float<cuda::binary_gradient, cuda::cast>, floating);
  r.add<OpId::kCompare>(kCuda, cpu::via_float<cuda::compare, cuda::cast>);
  r.add<OpId::kUnary>(kCuda, cpu::via_float<cuda::unary, cuda::cast>,
                      {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBF16});
  r.add<OpId::kUnaryGradient>(kCuda, cpu::via_float<cuda::unary_gradient, cuda::cast>, floating);
  r.add<OpId::kAddScaled>(kCuda, cpu::via_float<cuda::add_scaled, cuda::cast>, floating);
  r.add<OpId::kBroadcastTo>(kCuda, cuda::broadcast_to);
  r.add<OpId::kReduce>(kCuda, cpu::via_float<cuda::reduce, cuda::cast>, numeric);
  r.add<OpId::kArgmax>(kCuda, cpu::via_float<cuda::argmax, cuda::cast>, numeric);
  r.add<OpId::kMatmul>(kCuda, cuda::matmul, floating);
  r.add<OpId::kBiasAdd>(kCuda, cpu::via_float<cuda::bias_add, cuda::cast>, floating);
  r.add<OpId::kActivation>(kCuda, cpu::via_float<cuda::activation, cuda::cast>, floating);
  r.add<OpId::kActivationGradient>(kCuda, cpu::via_float<cuda::activation_gradient, cuda::cast>,
                                   floating);
  r.add<OpId::kBiasGradient>(kCuda, cpu::via_float<cuda::bias_gradient, cuda::cast>, floating);
  // Layout and indexing (layout_kernels.cpp): layout ops move bytes, so every dtype of the
  // reference; gather by params' dtype, one_hot by the indices' (any output dtype).
  const DTypes every{DType::kF32, DType::kF64,  DType::kI32, DType::kI64,
                     DType::kU8,  DType::kBool, DType::kBF16};
  r.add<OpId::kTranspose>(kCuda, cuda::transpose, every);
  r.add<OpId::kConcat>(kCuda, cuda::concat, every);
  r.add<OpId::kSlice>(kCuda, cuda::slice, every);
  r.add<OpId::kSliceGradient>(kCuda, cuda::slice_gradient, every);
  r.add<OpId::kGather>(kCuda, cuda::gather, every);
  r.add<OpId::kGatherGradient>(kCuda, cpu::via_float<cuda::gather_gradient, cuda::cast>, floating);
  r.add<OpId::kOneHot>(kCuda, cpu::via_float<cuda::one_hot, cuda::cast>,
                       {DType::kI32, DType::kI64});
  // Softmax, the losses and dropout's mask (softmax_loss_kernels.cpp).
  r.add<OpId::kDropoutMask>(kCuda, cpu::via_float<cuda::dropout_mask, cuda::cast>, floating);
  r.add<OpId::kSoftmax>(kCuda, cpu::via_float<cuda::softmax, cuda::cast>, floating);
  r.add<OpId::kSoftmaxGradient>(kCuda, cpu::via_float<cuda::softmax_gradient, cuda::cast>,
                                floating);
  r.add<OpId::kSparseCrossEntropy>(kCuda, cpu::via_float<cuda::sparse_cross_entropy, cuda::cast>,
                                   floating);
  r.add<OpId::kSparseCrossEntropyGradient>(
      kCuda, cpu::via_float<cuda::sparse_cross_entropy_gradient, cuda::cast>, floating);
  r.add<OpId::kCrossEntropy>(kCuda, cpu::via_float<cuda::cross_entropy, cuda::cast>, floating);
  r.add<OpId::kCrossEntropyGradient>(
      kCuda, cpu::via_float<cuda::cross_entropy_gradient, cuda::cast>, floating);
  r.add<OpId::kSigmoidCrossEntropy>(kCuda, cpu::via_float<cuda::sigmoid_cross_entropy, cuda::cast>,
                                    floating);
  r.add<OpId::kSigmoidCrossEntropyGradient>(
      kCuda, cpu::via_float<cuda::sigmoid_cross_entropy_gradient, cuda::cast>, floating);
  // Convolution (cuDNN), pooling and batch norm; cudnn_types() says which dtypes cuDNN has.
  const DTypes conv_dtypes{DType::kF32, DType::kF64, DType::kBF16};
  r.add<OpId::kConv2D>(kCuda, cpu::via_float<cuda::conv2d, cuda::cast>, conv_dtypes);
  r.add<OpId::kConv2DBackwardData>(kCuda, cpu::via_float<cuda::conv2d_backward_data, cuda::cast>,
                                   conv_dtypes);
  r.add<OpId::kConv2DBackwardWeights>(
      kCuda, cpu::via_float<cuda::conv2d_backward_weights, cuda::cast>, conv_dtypes);
  r.add<OpId::kConv2DWeightsFromOutput>(
      kCuda, cpu::via_float<cuda::conv2d_weights_from_output, cuda::cast>, conv_dtypes);
  r.add<OpId::kPool2D>(kCuda, cpu::via_float<cuda::pool2d, cuda::cast>, floating);
  r.add<OpId::kPool2DGradient>(kCuda, cpu::via_float<cuda::pool2d_gradient, cuda::cast>, floating);
  r.add<OpId::kBatchNorm>(kCuda, cpu::via_float<cuda::batch_norm, cuda::cast>, floating);
  r.add<OpId::kBatchNormGradient>(kCuda, cpu::via_float<cuda::batch_norm_gradient, cuda::cast>,
                                  floating);
  const DTypes optimizer_dtypes{DType::kF32, DType::kF64};  // fused updates
  r.add<OpId::kApplySgd>(kCuda, cuda::apply_sgd, optimizer_dtypes);
  r.add<OpId::kApplyMomentum>(kCuda, cuda::apply_momentum, optimizer_dtypes);
  r.add<OpId::kApplyAdam>(kCuda, cuda::apply_adam, optimizer_dtypes);
  r.add<OpId::kApplyAdagrad>(kCuda, cuda::apply_adagrad, optimizer_dtypes);
  r.add<OpId::kApplyRmsprop>(kCuda, cuda::apply_rmsprop, optimizer_dtypes);
}

}  // namespace est::ops
