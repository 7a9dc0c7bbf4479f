// RMSProp as tf.compat.v1.train.RMSPropOptimizer: the mean square starts at 1 (not 0),
// epsilon sits inside the square root, and the momentum slot accumulates lr-scaled steps.
// With the mean square starting at 0 it is Keras 2.11+'s RMSprop (keras/optimizers/rmsprop.py:
// velocity from zeros, gradient * lr * rsqrt(velocity + epsilon)), which keras/ uses.
#include <cmath>

#include <fmt/format.h>

#include "nn/optimizer_fused.h"
#include "nn/optimizers.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class RmsProp final : public UpdateRule {
 public:
  RmsProp(double decay, double momentum, double epsilon, bool centered, double initial_mean_square)
      : decay_(decay),
        momentum_(momentum),
        epsilon_(epsilon),
        centered_(centered),
        initial_mean_square_(initial_mean_square) {}
  std::string_view name() const override { return "RMSProp"; }
  void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    std::vector<Tensor> mean_squares, mean_gradients, moments;
    for (const GradAndVar& entry : grads) {
      mean_squares.push_back(get_slot(store, entry, "RMSProp", initial_mean_square_));
      if (centered_) mean_gradients.push_back(get_slot(store, entry, "RMSProp_1", 0.0));
      moments.push_back(get_slot(store, entry, centered_ ? "RMSProp_2" : "RMSProp_1", 0.0));
    }
    if (can_fuse(ops::OpId::kApplyRmsprop, grads, {&mean_squares, &mean_gradients, &moments})) {
      const ops::RmspropParams params{.learning_rate = learning_rate,
                                      .decay = decay_,
                                      .momentum = momentum_,
                                      .epsilon = epsilon_,
                                      .centered = centered_};
      run_fused<ops::OpId::kApplyRmsprop>(grads, mean_squares, mean_gradients, moments, params);
      return;
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const GradAndVar& entry = grads[i];
      const Tensor& g = entry.gradient;
      Tensor mean_square = mean_squares[i];
      Tensor mean_gradient = centered_ ? mean_gradients[i] : Tensor();
      Tensor moment = moments[i];
      Tensor variable = entry.variable;
      mean_square.copy_from(
          ops::add(ops::mul(mean_square, decay_), ops::mul(ops::square(g), 1.0 - decay_)));
      Tensor denominator = mean_square;
      if (centered_) {
        mean_gradient.copy_from(
            ops::add(ops::mul(mean_gradient, decay_), ops::mul(g, 1.0 - decay_)));
        denominator = ops::sub(mean_square, ops::square(mean_gradient));
      }
      Tensor scaled =
          ops::div(ops::mul(g, learning_rate), ops::sqrt(ops::add(denominator, epsilon_)));
      moment.copy_from(ops::add(ops::mul(moment, momentum_), scaled));
      variable.copy_from(ops::sub(variable, moment));
    }
  }

 private:
  double decay_;
  double momentum_;
  double epsilon_;
  bool centered_;
  double initial_mean_square_;
};

}  // namespace

Optimizer rmsprop(LearningRate learning_rate, double decay, double momentum, double epsilon,
                  bool centered, double initial_mean_square) {
  if (!(decay >= 0 && decay <= 1))
    throw InvalidArgumentError(fmt::format("rmsprop: decay must be in [0, 1], got {}", decay));
  if (!(momentum >= 0) || !std::isfinite(momentum))
    throw InvalidArgumentError(
        fmt::format("rmsprop: momentum must be non-negative, got {}", momentum));
  if (!(epsilon > 0))
    throw InvalidArgumentError(fmt::format("rmsprop: epsilon must be positive, got {}", epsilon));
  return Optimizer(
      std::make_shared<RmsProp>(decay, momentum, epsilon, centered, initial_mean_square),
      std::move(learning_rate));
}

}  // namespace est::nn::optim
