// FTRL-proximal as tf.compat.v1.train.FtrlOptimizer (tensorflow/python/training/ftrl.py, and
// the ApplyFtrl / ApplyFtrlV2 CPU kernels in tensorflow/core/kernels/training_ops.cc):
//
//   g'       = g + 2 * l2_shrinkage * var          (shrinkage only enters the linear term)
//   accum'   = accum + g^2
//   linear  += g' - (accum'^(-p) - accum^(-p)) / lr * var          p = learning_rate_power
//   var      = |linear| > l1 ? (l1 * sign(linear) - linear) / (accum'^(-p) / lr + 2 * l2) : 0
//
// Slots as TF1 names them: `<var>/Ftrl` (the accumulator, starting at
// initial_accumulator_value) and `<var>/Ftrl_1` (the linear term, starting at 0). There is no
// fused kernel: the update is a handful of elementwise ops, so it runs on whatever device the
// variable lives on. A row-sparse gradient runs the same formula on its rows only (TF1's
// _apply_sparse: SparseApplyFtrl / SparseApplyFtrlV2), other rows and their slots untouched.
// The thresholded step is written as (clip(linear, -l1, l1) - linear) / y,
// which equals TF's select without a sign op; p = -0.5 takes sqrt, as TF's kernel does.
#include <cmath>

#include <fmt/format.h>

#include "nn/optimizers.h"
#include "nn/row_update.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class Ftrl final : public UpdateRule {
 public:
  explicit Ftrl(const FtrlOptions& options) : options_(options) {}
  std::string_view name() const override { return "Ftrl"; }
  bool updates_rows() const override { return true; }
  void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    std::vector<Tensor> accumulators, linears;
    for (const GradAndVar& entry : grads) {
      accumulators.push_back(get_slot(store, entry, "Ftrl", options_.initial_accumulator_value));
      linears.push_back(get_slot(store, entry, "Ftrl_1", 0.0));
    }
    update_rows(grads, {accumulators, linears},
                [&](const std::vector<GradAndVar>& dense, std::vector<std::vector<Tensor>>& slots) {
                  for (size_t i = 0; i < dense.size(); ++i)
                    update(dense[i], slots[0][i], slots[1][i], learning_rate);
                });
  }

 private:
  void update(const GradAndVar& entry, Tensor accumulator, Tensor linear,
              double learning_rate) const {
    const double power = options_.learning_rate_power;
    const auto root = [power](const Tensor& accum) {  // accum^(-power)
      return power == -0.5 ? ops::sqrt(accum) : ops::pow(accum, -power);
    };
    Tensor variable = entry.variable;
    const Tensor& g = entry.gradient;
    Tensor shrunk_gradient =
        options_.l2_shrinkage_regularization_strength > 0
            ? ops::add(g, ops::mul(variable, 2 * options_.l2_shrinkage_regularization_strength))
            : g;
    Tensor new_accumulator = ops::add(accumulator, ops::square(g));
    Tensor new_root = root(new_accumulator);
    Tensor sigma = ops::mul(ops::sub(new_root, root(accumulator)), 1.0 / learning_rate);
    linear.copy_from(ops::add(linear, ops::sub(shrunk_gradient, ops::mul(sigma, variable))));
    Tensor quadratic =
        ops::add(ops::mul(new_root, 1.0 / learning_rate), 2 * options_.l2_regularization_strength);
    const double l1 = options_.l1_regularization_strength;
    variable.copy_from(ops::div(ops::sub(ops::clip(linear, -l1, l1), linear), quadratic));
    accumulator.copy_from(new_accumulator);
  }

  FtrlOptions options_;
};

void check_non_negative(const char* what, double value) {
  if (!(value >= 0) || !std::isfinite(value))
    throw InvalidArgumentError(
        fmt::format("ftrl: {} must be zero or positive (and finite), got {}", what, value));
}

}  // namespace

Optimizer ftrl(LearningRate learning_rate, const FtrlOptions& options) {
  if (!(options.learning_rate_power <= 0) || !std::isfinite(options.learning_rate_power))
    throw InvalidArgumentError(
        fmt::format("ftrl: learning_rate_power must be zero or negative (-0.5 is TF's default), "
                    "got {}",
                    options.learning_rate_power));
  check_non_negative("initial_accumulator_value", options.initial_accumulator_value);
  check_non_negative("l1_regularization_strength", options.l1_regularization_strength);
  check_non_negative("l2_regularization_strength", options.l2_regularization_strength);
  check_non_negative("l2_shrinkage_regularization_strength",
                     options.l2_shrinkage_regularization_strength);
  return Optimizer(std::make_shared<Ftrl>(options), std::move(learning_rate));
}

}  // namespace est::nn::optim
