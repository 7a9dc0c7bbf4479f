// Recognising the fusable activations by their address.
#include "nn/activation.h"

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
  if (fn != nullptr) custom_ = [fn](const Tensor& x) { return fn(x, -1); };
}

Tensor Activation::operator()(const Tensor& x) const {
  return apply_unfused(ops::activate(x, fused_));
}

}  // namespace est::nn
