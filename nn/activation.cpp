// Recognising the fusable activations by their address.
#include "nn/activation.h"

#include "ops/array_ops.h"
#include "ops/math.h"

namespace est::nn {

Activation::Activation(ActivationFn fn) {
  if (fn == nullptr) return;
  if (fn == &ops::relu) {
    fused_ = ops::Activation::kRelu;
  } else if (fn == &ops::sigmoid) {
    fused_ = ops::Activation::kSigmoid;
  } else if (fn == &ops::tanh) {
    fused_ = ops::Activation::kTanh;
  } else {
    custom_ = fn;
  }
}

Activation::Activation(AxisActivationFn fn) {
  // softmax and log_softmax of a bfloat16 input run in float32 and return float32, as
  // Keras advises for a mixed-precision model's output (nn/mixed_precision.h).
  if (fn != nullptr)
    custom_ = [fn](const Tensor& x) {
      return fn(x.dtype() == DType::kBF16 ? ops::cast(x, DType::kF32) : x, -1);
    };
}

Tensor Activation::operator()(const Tensor& x) const {
  return apply_unfused(ops::activate(x, fused_));
}

}  // namespace est::nn
