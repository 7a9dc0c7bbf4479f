// Adagrad as tf.compat.v1.train.AdagradOptimizer: the accumulator starts at
// initial_accumulator_value (0.1), which also keeps the first division finite. A row-sparse
// gradient updates only its rows and their accumulators (adagrad.py's sparse_apply_adagrad).
// With an epsilon (nn/adagrad.h: Keras 2.11+'s and Keras 3's keras/optimizers/adagrad.py), the
// step divides by sqrt(accum + epsilon).
#include <cmath>

#include <fmt/format.h>

#include "nn/adagrad.h"
#include "nn/optimizer_fused.h"
#include "nn/optimizers.h"
#include "nn/row_update.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class Adagrad final : public UpdateRule {
 public:
  Adagrad(double initial, double epsilon) : initial_(initial), epsilon_(epsilon) {}
  std::string_view name() const override { return "Adagrad"; }
  bool updates_rows() const override { return true; }
  void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    std::vector<Tensor> accumulators;
    for (const GradAndVar& entry : grads)
      accumulators.push_back(get_slot(store, entry, "Adagrad", initial_));
    update_rows(grads, {accumulators},
                [&](const std::vector<GradAndVar>& dense, std::vector<std::vector<Tensor>>& slots) {
                  apply_dense(dense, slots[0], learning_rate, epsilon_);
                });
  }

 private:
  static void apply_dense(const std::vector<GradAndVar>& grads, std::vector<Tensor>& accumulators,
                          double learning_rate, double epsilon) {
    if (epsilon == 0 && can_fuse(ops::OpId::kApplyAdagrad, grads, {&accumulators})) {
      run_fused<ops::OpId::kApplyAdagrad>(grads, accumulators, learning_rate);
      return;
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const GradAndVar& entry = grads[i];
      Tensor accumulator = accumulators[i];
      Tensor variable = entry.variable;
      accumulator.copy_from(ops::add(accumulator, ops::square(entry.gradient)));
      Tensor root = ops::sqrt(epsilon == 0 ? accumulator : ops::add(accumulator, epsilon));
      Tensor step = ops::div(ops::mul(entry.gradient, learning_rate), root);
      variable.copy_from(ops::sub(variable, step));
    }
  }

  double initial_;
  double epsilon_;
};

}  // namespace

Optimizer adagrad(LearningRate learning_rate, double initial_accumulator_value) {
  if (!(initial_accumulator_value > 0) || !std::isfinite(initial_accumulator_value))
    throw InvalidArgumentError(fmt::format(
        "adagrad: initial_accumulator_value must be positive, got {}", initial_accumulator_value));
  return Optimizer(std::make_shared<Adagrad>(initial_accumulator_value, 0.0),
                   std::move(learning_rate));
}

Optimizer adagrad_with_epsilon(LearningRate learning_rate, double initial_accumulator_value,
                               double epsilon) {
  if (!(initial_accumulator_value >= 0) || !std::isfinite(initial_accumulator_value))
    throw InvalidArgumentError(
        fmt::format("Adagrad: initial_accumulator_value must be non-negative, got {}",
                    initial_accumulator_value));
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    throw InvalidArgumentError(fmt::format(
        "Adagrad: epsilon must be a positive number (Keras's default is 1e-7), got {}", epsilon));
  return Optimizer(std::make_shared<Adagrad>(initial_accumulator_value, epsilon),
                   std::move(learning_rate));
}

}  // namespace est::nn::optim
