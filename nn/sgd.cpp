// Plain gradient descent: var -= lr * g (tf.compat.v1.train.GradientDescentOptimizer). A
// row-sparse gradient moves only its rows (gradient_descent.py's scatter_add of -lr * values).
#include "nn/optimizer_fused.h"
#include "nn/optimizers.h"
#include "nn/row_update.h"
#include "ops/math.h"

namespace est::nn::optim {
namespace {

class Sgd final : public UpdateRule {
 public:
  std::string_view name() const override { return "GradientDescent"; }
  bool updates_rows() const override { return true; }
  void apply(VariableStore&, const std::vector<GradAndVar>& grads,
             double learning_rate) const override {
    update_rows(grads, {}, [&](const std::vector<GradAndVar>& dense, auto&) {
      apply_dense(dense, learning_rate);
    });
  }

 private:
  static void apply_dense(const std::vector<GradAndVar>& grads, double learning_rate) {
    if (can_fuse(ops::OpId::kApplySgd, grads)) {
      run_fused<ops::OpId::kApplySgd>(grads, learning_rate);
      return;
    }
    for (const GradAndVar& entry : grads) {
      Tensor variable = entry.variable;
      ops::add_scaled_in_place(variable, entry.gradient, -learning_rate);
    }
  }
};

}  // namespace

Optimizer sgd(LearningRate learning_rate) {
  return Optimizer(std::make_shared<Sgd>(), std::move(learning_rate));
}

}  // namespace est::nn::optim
