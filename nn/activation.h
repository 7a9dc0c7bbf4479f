// nn::Activation: what a layer's `.activation` field holds.
//
// It is implicitly constructible from a function pointer so that `.activation = relu` reads as
// in Keras. relu, sigmoid and tanh (est::nn's, which are est::ops's) are recognised and handed
// to the kernels as a fused ops::Activation; any other function or callable runs after the
// layer as an op of its own. `softmax` (which takes an axis) is accepted and applied on the
// last axis, in float32 when the layer computed in bfloat16.
#pragma once

#include <cstddef>
#include <functional>
#include <type_traits>

#include "ops/linalg.h"
#include "ops/tensor.h"

namespace est::nn {

using ActivationFn = Tensor (*)(const Tensor&);
using AxisActivationFn = Tensor (*)(const Tensor&, int);  // softmax, log_softmax

class Activation {
 public:
  Activation() = default;  // no activation (linear)
  Activation(std::nullptr_t) {}
  Activation(ActivationFn fn);      // NOLINT: implicit on purpose
  Activation(AxisActivationFn fn);  // NOLINT: called with axis -1
  // Any other callable (a lambda, a functor) runs unfused; a captureless lambda that is one of
  // the fusable functions is not recognised (compare by address only works for functions).
  template <class F>
  requires(std::is_invocable_r_v<Tensor, F, const Tensor&> &&
           !std::is_same_v<std::decay_t<F>, Activation>)
      Activation(F fn) {  // NOLINT: implicit on purpose
    if constexpr (std::is_convertible_v<F, ActivationFn>)
      *this = Activation(static_cast<ActivationFn>(fn));
    else
      custom_ = std::move(fn);
  }

  bool is_none() const { return fused_ == ops::Activation::kNone && !custom_; }
  // The activation the kernels can fuse (kNone when there is none or it is not fusable).
  ops::Activation fused() const { return fused_; }
  // Applies the part that was not fused: returns x itself when everything was fused.
  Tensor apply_unfused(const Tensor& x) const { return custom_ ? custom_(x) : x; }
  // Applies the whole activation as ops (for layers whose kernel does not fuse).
  Tensor operator()(const Tensor& x) const;

 private:
  ops::Activation fused_ = ops::Activation::kNone;
  std::function<Tensor(const Tensor&)> custom_;
};

}  // namespace est::nn
