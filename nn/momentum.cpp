// Momentum, optionally Nesterov, as tf.compat.v1.train.MomentumOptimizer (the accumulator
// holds the sum of past gradients, not a velocity scaled by the learning rate). A row-sparse
// gradient updates only its rows and their accumulators (momentum.py's sparse_apply_momentum),
// so rows it does not name keep their velocity unspent, unlike the dense update.
#include <cmath>

#include <fmt/format.h>

#include "nn/optimizer_fused.h"
#include "nn/optimizers.h"
#include "nn/row_update.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class Momentum final : public UpdateRule {
 public:
  Momentum(double momentum, bool use_nesterov) : momentum_(momentum), nesterov_(use_nesterov) {}
  std::string_view name() const override { return "Momentum"; }
  bool updates_rows() const override { return true; }
  void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    std::vector<Tensor> accumulators;
    for (const GradAndVar& entry : grads)
      accumulators.push_back(get_slot(store, entry, "Momentum", 0.0));
    update_rows(grads, {accumulators},
                [&](const std::vector<GradAndVar>& dense, std::vector<std::vector<Tensor>>& slots) {
                  apply_dense(dense, slots[0], learning_rate);
                });
  }

 private:
  void apply_dense(const std::vector<GradAndVar>& grads, std::vector<Tensor>& accumulators,
                   double learning_rate) const {
    if (can_fuse(ops::OpId::kApplyMomentum, grads, {&accumulators})) {
      run_fused<ops::OpId::kApplyMomentum>(grads, accumulators, learning_rate, momentum_,
                                           nesterov_);
      return;
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const GradAndVar& entry = grads[i];
      Tensor accumulator = accumulators[i];
      Tensor variable = entry.variable;
      accumulator.copy_from(ops::add(ops::mul(accumulator, momentum_), entry.gradient));
      Tensor step = nesterov_ ? ops::add(ops::mul(entry.gradient, learning_rate),
                                         ops::mul(accumulator, learning_rate * momentum_))
                              : ops::mul(accumulator, learning_rate);
      variable.copy_from(ops::sub(variable, step));
    }
  }

  double momentum_;
  bool nesterov_;
};

}  // namespace

Optimizer momentum(LearningRate learning_rate, double momentum, bool use_nesterov) {
  if (!(momentum >= 0) || !std::isfinite(momentum))
    throw InvalidArgumentError(
        fmt::format("momentum: the momentum must be finite and non-negative, got {}", momentum));
  return Optimizer(std::make_shared<Momentum>(momentum, use_nesterov), std::move(learning_rate));
}

}  // namespace est::nn::optim
