// Learning rates as functions of the global step, accepted wherever a learning rate is:
// `optim::sgd(0.1)` and `optim::sgd(optim::exponential_decay(0.1, 1000, 0.96))` both work.
// The optimizer evaluates the rate at the global step before that step's increment, as a
// TF1 graph reads `global_step` before `apply_gradients` bumps it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace est::nn::optim {

class LearningRate {
 public:
  LearningRate(double value);  // NOLINT: a constant rate, implicit on purpose
  // Any function of the global step, e.g. a lambda.
  template <class F>
  requires(std::is_invocable_r_v<double, F, int64_t> && !std::is_arithmetic_v<F> &&
           !std::is_same_v<std::decay_t<F>, LearningRate>) LearningRate(F schedule)
      : schedule_(std::move(schedule)) {}  // NOLINT

  double at(int64_t global_step) const;  // InvalidArgumentError when not finite or negative
  bool is_constant() const { return !schedule_; }

 private:
  double value_ = 0.0;
  std::function<double(int64_t)> schedule_;
};

// learning_rate * decay_rate ^ (step / decay_steps), with an integer exponent when staircase.
LearningRate exponential_decay(double learning_rate, int64_t decay_steps, double decay_rate,
                               bool staircase = false);
// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <=
// boundaries[i], values.back() after the last boundary (tf.compat.v1.train.piecewise_constant).
// Needs values.size() == boundaries.size() + 1 and increasing boundaries.
LearningRate piecewise_constant(std::vector<int64_t> boundaries, std::vector<double> values);

}  // namespace est::nn::optim
