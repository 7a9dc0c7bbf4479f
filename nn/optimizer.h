// Optimizer: a value-type configuration (update rule, learning rate, optional clipping) whose
// state lives in the VariableStore, not in the object.
//
// Slots are variables named as TF1 names them (`dense/kernel/Momentum`, `dense/kernel/Adam`,
// `dense/kernel/Adam_1`, `beta1_power`, ...), non-trainable, so a checkpoint captures them
// and a fresh `optim::adam()` built in the next model_fn call finds its state again.
// An UpdateRule is the one thing each optimizer file implements: how to move each variable,
// in place, given its gradient and the learning rate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/losses.h"
#include "nn/schedules.h"
#include "nn/variable_store.h"
#include "ops/indexed_slices.h"

namespace est::nn {

class CrossReplicaSync;
class ModelContext;
class TrainOp;

// One variable, its full name (slot names derive from it) and its gradient: dense, or
// row-sparse (TF's IndexedSlices) when the step only read rows of the variable (embedding
// lookups; TrainOp::compute_gradients gives them so). Neither: the variable is skipped
// (TensorFlow's None gradient).
struct GradAndVar {
  std::string name;
  Tensor gradient;  // dense; undefined when the gradient is sparse_gradient, or None
  Tensor variable;
  ops::IndexedSlices sparse_gradient;  // defined instead of `gradient` for a row-sparse one

  bool has_gradient() const { return gradient.defined() || sparse_gradient.defined(); }
  // The gradient as a dense tensor, densifying a row-sparse one (a fresh tensor each call).
  Tensor dense_gradient() const {
    return sparse_gradient.defined() ? ops::to_dense(sparse_gradient) : gradient;
  }
  // Makes a row-sparse gradient dense in place.
  void densify() {
    if (!sparse_gradient.defined()) return;
    gradient = ops::to_dense(sparse_gradient);
    sparse_gradient = {};
  }
};

// Rewrites gradients before the update: the distribution strategy's all-reduce
// (ReplicaContext::gradient_transform()). TrainOp::run applies what it leaves as aggregated
// (ApplyOptions::experimental_aggregate_gradients false: no second sum inside strategy.run).
using GradientTransform = std::function<void(std::vector<GradAndVar>&)>;

// A replica's side of its distribution strategy while a step runs (TF's replica context). The
// strategy gives it to the replica's ModelContext for the step (ContextControl::replica_sync(),
// nn/context_control.h): Optimizer::apply_gradients with that context hands it the gradients
// first, so that an update inside strategy.run is synchronized however the step was written
// (TrainOp::run, apply_gradients with gradients from ops::gradients, ...). nn only declares the
// interface; distribute/ implements it.
class CrossReplicaSync {
 public:
  virtual ~CrossReplicaSync() = default;
  // Sums the gradients over replicas in place when `aggregate` (false: the caller summed them
  // already, ApplyOptions::experimental_aggregate_gradients) and says whether this replica
  // applies the update (mirrored variables: every replica; central storage: replica 0 only).
  virtual bool synchronize(std::vector<GradAndVar>& grads_and_vars, bool aggregate) = 0;
  // After the update (or instead of it, on replicas that do not apply it): central storage
  // waits here until the shared variables are updated.
  virtual void after_update() = 0;
  // A training model_fn just created variable `name` with `value` (in the store): a strategy
  // may overwrite it in place (across workers, with the chief's value). Every replica of the
  // step creates the same variables in the same order, so this may be a collective.
  virtual void initialize_variable(const std::string& /*name*/, Tensor& /*value*/) {}
  // A model_fn is about to read variable `name` of the store (`value`: the store's tensor):
  // whole (`rows` null: ModelContext::get_variable), or only the rows `*rows` names along
  // axis 0 (ModelContext::get_variable_rows, an embedding lookup: integer ids of any shape,
  // negative ones skipped). A strategy whose store caches variables that live elsewhere
  // (parameter servers) brings what will be read up to date in `value`, in place.
  virtual void read_variable(const std::string& /*name*/, Tensor& /*value*/,
                             const Tensor* /*rows*/) {}
};

namespace optim {

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  virtual std::string_view name() const = 0;  // "Adam": slot names, messages
  // Moves every variable in place; gradients are defined and match their variable's shape
  // and dtype. Creates slots on first use. Called under ops::NoGradGuard.
  // Entries are dense unless updates_rows(); then a row-sparse one (sparse_gradient) comes
  // with its duplicates summed, on the CPU, and the rule updates the rows it names (TF1's
  // _apply_sparse: only those rows and their slots change, unless the rule says otherwise).
  virtual void apply(VariableStore& store, const std::vector<GradAndVar>& grads,
                     double learning_rate) const = 0;
  // Whether apply() takes row-sparse gradients; a rule that does not gets them densified.
  virtual bool updates_rows() const { return false; }
};

// The keyword arguments of Optimizer::apply_gradients with a ModelContext, by TF2's names
// (tf.keras.optimizers.Optimizer.apply_gradients, keras/optimizer_v2/optimizer_v2.py).
struct ApplyOptions {
  // Inside strategy.run: true sums the gradients over the replicas first (TF's default); false
  // takes them as summed already (ReplicaContext::all_reduce_gradients, all_reduce) and applies
  // them as the strategy places the variables (central storage: once, by replica 0, while the
  // others wait), without another sum. Outside strategy.run it changes nothing.
  bool experimental_aggregate_gradients = true;
};

// The keyword arguments of Optimizer::minimize.
struct MinimizeOptions {
  // The reduction the loss was computed with, which decides what scales its gradients under a
  // distribution strategy (distribute/gradient_path.cpp, TF1's Optimizer._scale_loss). The
  // canned heads and Keras pass theirs. Unset: the reduction a loss function of nn/losses.h
  // recorded on the loss (nn::loss_reduction, as TF1 reads the graph's last loss reduction), so
  // that TF1 model_fns work as written.
  std::optional<Reduction> loss_reduction;
};

class Optimizer {
 public:
  Optimizer(std::shared_ptr<const UpdateRule> rule, LearningRate learning_rate);

  std::string_view name() const { return rule_->name(); }
  const LearningRate& learning_rate() const { return learning_rate_; }
  // A copy that clips gradients by their global norm before each update.
  Optimizer clip_by_global_norm(double clip_norm) const;
  std::optional<double> clip_norm() const { return clip_norm_; }
  // A copy with another learning rate, same rule and clipping (Keras's callbacks set a model's
  // optimizer.learning_rate between epochs: keras/training.cpp).
  Optimizer with_learning_rate(LearningRate learning_rate) const;

  // Deferred training step over the trainable variables this model_fn call used: nothing is
  // computed until TrainOp::run(). The loss must be a scalar that depends on them.
  // Outside training (ctx.mode() is kEval or kPredict) it checks nothing and returns an empty
  // TrainOp: TF1 model_fns build their train op in every mode and the Estimator ignores it
  // there (tf.estimator.EstimatorSpec drops train_op unless mode is TRAIN), so neither an
  // update nor an error may come of it; the loss may then even be undefined.
  TrainOp minimize(const Tensor& loss, ModelContext& ctx, MinimizeOptions options = {}) const;

  // The update alone: each pair checked, a row-sparse gradient's duplicates summed (or the
  // gradient densified, for a rule that does not update rows), clipping by the global norm
  // (when set), then the variables (and slots) moved in place with the learning rate at `step`
  // (the learning-rate schedule's step: the global step being taken). Undefined gradients skip
  // their variable. It reads and writes no global_step and asks no strategy: the caller owns
  // the step count (apply_gradients below, a GradientPath, a ps task).
  void update(VariableStore& store, std::vector<GradAndVar> grads_and_vars, int64_t step) const;

  // update() at the store's global step, then global_step += 1, here, unsynchronized: for
  // custom training loops outside strategy.run (inside it, use the ModelContext overloads).
  void apply_gradients(VariableStore& store, std::vector<GradAndVar> grads_and_vars) const;
  // The same with parallel lists; variables are looked up in the store by their storage.
  void apply_gradients(VariableStore& store, const std::vector<Tensor>& gradients,
                       const std::vector<Tensor>& variables) const;
  // The same on ctx's store. Inside strategy.run it goes through the replica that ctx computes
  // for (ContextControl::replica_sync(), nn/context_control.h): the gradients are summed over
  // the replicas first, unless `options` says they are summed already, so clipping sees the
  // global gradient, and the update is applied as the strategy places the variables.
  void apply_gradients(ModelContext& ctx, std::vector<GradAndVar> grads_and_vars,
                       ApplyOptions options = {}) const;
  void apply_gradients(ModelContext& ctx, const std::vector<Tensor>& gradients,
                       const std::vector<Tensor>& variables, ApplyOptions options = {}) const;

 private:
  void apply_here(VariableStore& store, std::vector<GradAndVar> grads_and_vars) const;
  // update()'s first half: the gradients present, checked, deduplicated or densified, clipped.
  std::vector<GradAndVar> prepare(std::vector<GradAndVar> grads_and_vars) const;
  // update()'s second half: the rule's move of `present` at `step`'s learning rate.
  void move(VariableStore& store, std::vector<GradAndVar> present, int64_t step) const;

  std::shared_ptr<const UpdateRule> rule_;
  LearningRate learning_rate_;
  std::optional<double> clip_norm_;
};

// Clips the gradients of `grads` (each present; a row-sparse one with distinct rows, so that
// its values' norm is the dense gradient's) by their global norm, in place, as
// tf.clip_by_global_norm over the model's gradients: Optimizer::update's clipping, and a
// parameter-server worker's before its push (the owners each see only part of the gradients).
void clip_by_global_norm(std::vector<GradAndVar>& grads, double clip_norm);

// Slot `<variable name>/<slot>` of the variable's shape and dtype, filled with `initial_value`
// on creation, not trainable. An existing slot of another shape is an InvalidArgumentError.
Tensor get_slot(VariableStore& store, const GradAndVar& entry, std::string_view slot,
                double initial_value);
// A scalar non-slot variable such as `beta1_power`, created with `initial_value`.
Tensor get_non_slot(VariableStore& store, const std::string& name, DType dtype,
                    double initial_value);

}  // namespace optim
}  // namespace est::nn

namespace est {
namespace optim = nn::optim;
}  // namespace est
