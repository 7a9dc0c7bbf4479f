// The reference backend's entries in the kernel registry: one kernel per registry op, every
// dtype (each kernel rejects the dtypes its op does not define, with the op's name). Kernels
// that only move or compare elements (and fill, cast, argmax, one_hot) handle bfloat16
// themselves; the others compute bfloat16 in float32 through via_float (ops/cpu/via_float.h).
#include "ops/cpu/kernels.h"
#include "ops/cpu/via_float.h"
#include "ops/registry.h"

namespace est::ops {

void register_reference_kernels(KernelRegistry& registry) {
  constexpr KernelTarget kReference{DeviceType::kCPU, Backend::kReference};
  auto& r = registry;
  r.add<OpId::kFill>(kReference, cpu::fill);
  r.add<OpId::kCopy>(kReference, cpu::copy);
  r.add<OpId::kCast>(kReference, cpu::cast);
  r.add<OpId::kBinary>(kReference, cpu::via_float<cpu::binary>);
  r.add<OpId::kBinaryGradient>(kReference, cpu::via_float<cpu::binary_gradient>);
  r.add<OpId::kCompare>(kReference, cpu::compare);
  r.add<OpId::kUnary>(kReference, cpu::via_float<cpu::unary>);
  r.add<OpId::kUnaryGradient>(kReference, cpu::via_float<cpu::unary_gradient>);
  r.add<OpId::kAddScaled>(kReference, cpu::via_float<cpu::add_scaled>);
  r.add<OpId::kBroadcastTo>(kReference, cpu::broadcast_to);
  r.add<OpId::kReduce>(kReference, cpu::via_float<cpu::reduce>);
  r.add<OpId::kArgmax>(kReference, cpu::argmax);
  r.add<OpId::kTranspose>(kReference, cpu::transpose);
  r.add<OpId::kConcat>(kReference, cpu::concat);
  r.add<OpId::kSlice>(kReference, cpu::slice);
  r.add<OpId::kSliceGradient>(kReference, cpu::slice_gradient);
  r.add<OpId::kGather>(kReference, cpu::gather);
  r.add<OpId::kGatherGradient>(kReference, cpu::via_float<cpu::gather_gradient>);
  r.add<OpId::kOneHot>(kReference, cpu::one_hot);
  r.add<OpId::kDropoutMask>(kReference, cpu::via_float<cpu::dropout_mask>);
  r.add<OpId::kSoftmax>(kReference, cpu::via_float<cpu::softmax>);
  r.add<OpId::kSoftmaxGradient>(kReference, cpu::via_float<cpu::softmax_gradient>);
  r.add<OpId::kSparseCrossEntropy>(kReference, cpu::via_float<cpu::sparse_cross_entropy>);
  r.add<OpId::kSparseCrossEntropyGradient>(kReference,
                                           cpu::via_float<cpu::sparse_cross_entropy_gradient>);
  r.add<OpId::kCrossEntropy>(kReference, cpu::via_float<cpu::cross_entropy>);
  r.add<OpId::kCrossEntropyGradient>(kReference, cpu::via_float<cpu::cross_entropy_gradient>);
  r.add<OpId::kSigmoidCrossEntropy>(kReference, cpu::via_float<cpu::sigmoid_cross_entropy>);
  r.add<OpId::kSigmoidCrossEntropyGradient>(kReference,
                                            cpu::via_float<cpu::sigmoid_cross_entropy_gradient>);
  r.add<OpId::kMatmul>(kReference, cpu::via_float<cpu::matmul>);
  r.add<OpId::kBiasAdd>(kReference, cpu::via_float<cpu::bias_add>);
  r.add<OpId::kActivation>(kReference, cpu::via_float<cpu::activate>);
  r.add<OpId::kActivationGradient>(kReference, cpu::via_float<cpu::activation_gradient>);
  r.add<OpId::kBiasGradient>(kReference, cpu::via_float<cpu::bias_gradient>);
  r.add<OpId::kConv2D>(kReference, cpu::via_float<cpu::conv2d>);
  r.add<OpId::kConv2DBackwardData>(kReference, cpu::via_float<cpu::conv2d_backward_data>);
  r.add<OpId::kConv2DBackwardWeights>(kReference, cpu::via_float<cpu::conv2d_backward_weights>);
  r.add<OpId::kConv2DWeightsFromOutput>(kReference,
                                        cpu::via_float<cpu::conv2d_weights_from_output>);
  r.add<OpId::kPool2D>(kReference, cpu::via_float<cpu::pool2d>);
  r.add<OpId::kPool2DGradient>(kReference, cpu::via_float<cpu::pool2d_gradient>);
  r.add<OpId::kBatchNorm>(kReference, cpu::via_float<cpu::batch_norm>);
  r.add<OpId::kBatchNormGradient>(kReference, cpu::via_float<cpu::batch_norm_gradient>);
  const DTypes optimizer_dtypes{DType::kF32, DType::kF64};  // fused updates
  r.add<OpId::kApplySgd>(kReference, cpu::apply_sgd, optimizer_dtypes);
  r.add<OpId::kApplyMomentum>(kReference, cpu::apply_momentum, optimizer_dtypes);
  r.add<OpId::kApplyAdam>(kReference, cpu::apply_adam, optimizer_dtypes);
  r.add<OpId::kApplyAdagrad>(kReference, cpu::apply_adagrad, optimizer_dtypes);
  r.add<OpId::kApplyRmsprop>(kReference, cpu::apply_rmsprop, optimizer_dtypes);
}

}  // namespace est::ops
