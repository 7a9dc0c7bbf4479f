// Adam with TF1's AdamOptimizer semantics: the bias correction is folded into the step size
// (lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)) and epsilon is added to sqrt(v) unscaled.
// beta1^t and beta2^t are the variables `beta1_power` and `beta2_power`, multiplied after
// every update, so they survive a checkpoint.
//
// A row-sparse gradient follows TF1's AdamOptimizer._apply_sparse (training/adam.py): m and v
// decay on every row and every row of the variable moves, which is the dense update with zero
// gradient rows, so adam() densifies it. lazy_adam() is LazyAdamOptimizer
// (tf.contrib.opt / tfa.optimizers.LazyAdam): the formula on the gradient's rows only, other
// rows and their m and v untouched; slot names are Adam's, so either reads the other's
// checkpoints.
#include <cmath>

#include <fmt/format.h>

#include "nn/optimizer_fused.h"
#include "nn/optimizers.h"
#include "nn/row_update.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class Adam final : public UpdateRule {
 public:
  Adam(double beta1, double beta2, double epsilon, bool lazy)
      : beta1_(beta1), beta2_(beta2), epsilon_(epsilon), lazy_(lazy) {}
  std::string_view name() const override { return "Adam"; }
  bool updates_rows() const override { return lazy_; }
  void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    DType dtype = grads.front().variable.dtype();
    Tensor beta1_power = get_non_slot(store, "beta1_power", dtype, beta1_);
    Tensor beta2_power = get_non_slot(store, "beta2_power", dtype, beta2_);
    double step_size =
        learning_rate * std::sqrt(1.0 - beta2_power.item()) / (1.0 - beta1_power.item());
    std::vector<Tensor> ms, vs;
    for (const GradAndVar& entry : grads) {
      ms.push_back(get_slot(store, entry, "Adam", 0.0));
      vs.push_back(get_slot(store, entry, "Adam_1", 0.0));
    }
    update_rows(grads, {ms, vs},
                [&](const std::vector<GradAndVar>& dense, std::vector<std::vector<Tensor>>& slots) {
                  if (can_fuse(ops::OpId::kApplyAdam, dense, {&slots[0], &slots[1]}))
                    run_fused<ops::OpId::kApplyAdam>(dense, slots[0], slots[1], step_size, beta1_,
                                                     beta2_, epsilon_);
                  else
                    apply_composite(dense, slots[0], slots[1], step_size);
                });
    beta1_power.fill(beta1_power.item() * beta1_);
    beta2_power.fill(beta2_power.item() * beta2_);
  }

 private:
  // The same update as one elementwise op per operation.
  void apply_composite(const std::vector<GradAndVar>& grads, std::vector<Tensor>& ms,
                       std::vector<Tensor>& vs, double step_size) const {
    for (size_t i = 0; i < grads.size(); ++i) {
      const GradAndVar& entry = grads[i];
      Tensor m = ms[i];
      Tensor v = vs[i];
      Tensor variable = entry.variable;
      m.copy_from(ops::add(ops::mul(m, beta1_), ops::mul(entry.gradient, 1.0 - beta1_)));
      v.copy_from(
          ops::add(ops::mul(v, beta2_), ops::mul(ops::square(entry.gradient), 1.0 - beta2_)));
      Tensor step = ops::div(ops::mul(m, step_size), ops::add(ops::sqrt(v), epsilon_));
      variable.copy_from(ops::sub(variable, step));
    }
  }

  double beta1_;
  double beta2_;
  double epsilon_;
  bool lazy_;
};

void check_beta(const char* name, double beta) {
  if (!(beta >= 0 && beta < 1))
    throw InvalidArgumentError(fmt::format("adam: {} must be in [0, 1), got {}", name, beta));
}

Optimizer make_adam(LearningRate learning_rate, double beta1, double beta2, double epsilon,
                    bool lazy) {
  check_beta("beta1", beta1);
  check_beta("beta2", beta2);
  if (!(epsilon > 0))
    throw InvalidArgumentError(fmt::format("adam: epsilon must be positive, got {}", epsilon));
  return Optimizer(std::make_shared<Adam>(beta1, beta2, epsilon, lazy), std::move(learning_rate));
}

}  // namespace

Optimizer adam(LearningRate learning_rate, double beta1, double beta2, double epsilon) {
  return make_adam(std::move(learning_rate), beta1, beta2, epsilon, false);
}

Optimizer lazy_adam(LearningRate learning_rate, double beta1, double beta2, double epsilon) {
  return make_adam(std::move(learning_rate), beta1, beta2, epsilon, true);
}

}  // namespace est::nn::optim
