// A GradientPath of the tests' own, shaped as a parameter server's in one process: replica 0's
// store plays the variables' owner. A replica's gradients (and moving statistics) go to the
// owner (here through the sum collective, as synchronous PS training aggregates them), only the
// owner applies the update, and the other replicas pull the owner's fresh values into their own
// stores before their next step reads them (before_step, once per update). Trained with the
// same batches it must end where MirroredStrategy ends, which shows that a strategy's step,
// from the custom loop or the Estimator, goes through its gradient path and nowhere else. It is
// also the strategy's VariableHome: the pull (before_step) is where the variables live.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "nn/context_control.h"
#include "nn/nn.h"

namespace est::testing {

class OwnerAppliesPath final : public distribute::GradientPath, public distribute::VariableHome {
 public:
  explicit OwnerAppliesPath(int replicas) : stale_(static_cast<size_t>(replicas), 0) {}
  std::string_view name() const override { return "owner applies"; }

  void before_step(distribute::ReplicaContext& replica) override {
    count(before_steps_);
    auto r = static_cast<size_t>(replica.replica_id());
    if (!stale_[r]) return;
    stale_[r] = 0;
    count(pulls_);
    nn::VariableStore& owner = replica.replica_set().store(0);
    nn::VariableStore& mine = replica.store();
    for (const nn::Variable& variable : owner.variables())
      if (mine.contains(variable.name)) mine.get(variable.name).value.copy_from(variable.value);
  }

  void apply(distribute::ReplicaContext& replica, const nn::TrainOp& train_op,
             double gradient_scale, nn::ModelContext& ctx, Tensor* loss_sum) override {
    count(applies_);
    std::vector<nn::GradAndVar> grads = train_op.compute_gradients();
    std::vector<nn::MovingAverageUpdate> updates =
        nn::ContextControl(ctx).take_moving_average_updates();
    if (loss_sum) *loss_sum = train_op.loss().detach().clone();
    push(replica, grads, gradient_scale, updates, loss_sum);
    train_op.apply(std::move(grads),  // only the owner's store: applies_updates
                   {.experimental_aggregate_gradients = false});
  }

  void combine(distribute::ReplicaContext& replica,
               std::vector<nn::GradAndVar>& grads_and_vars) override {
    count(combines_);
    std::vector<nn::MovingAverageUpdate> updates =
        nn::ContextControl(replica.model_context()).take_moving_average_updates();
    push(replica, grads_and_vars, 1.0, updates, nullptr);
  }

  bool applies_updates(const distribute::ReplicaContext& replica) const override {
    return replica.replica_id() == 0;
  }
  void after_update(distribute::ReplicaContext& /*replica*/) override {}
  void initialize_variable(distribute::ReplicaContext& /*replica*/, const std::string& /*name*/,
                           Tensor& /*value*/) override {}  // one process, one seed

  int before_steps() const { return before_steps_; }
  int pulls() const { return pulls_; }
  int applies() const { return applies_; }
  int combines() const { return combines_; }

 private:
  // The owner receives the sum of every replica's gradients; the moving statistics' mean is
  // applied to the owner's copy; every other replica's copy is stale from now on.
  void push(distribute::ReplicaContext& replica, std::vector<nn::GradAndVar>& grads, double scale,
            std::vector<nn::MovingAverageUpdate>& updates, Tensor* loss_sum) {
    replica.sync_step(grads, scale, updates, loss_sum);
    if (replica.replica_id() == 0)
      for (const auto& update : updates) nn::apply_moving_average(update);
    else
      stale_[static_cast<size_t>(replica.replica_id())] = 1;
  }
  void count(int& counter) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counter;
  }

  std::vector<char> stale_;  // [replica]: each written by its replica's thread only
  std::mutex mutex_;
  int before_steps_ = 0, pulls_ = 0, applies_ = 0, combines_ = 0;
};

// MirroredStrategy's devices and placement with the path above.
class OwnerAppliesStrategy final : public distribute::Strategy {
 public:
  OwnerAppliesStrategy(const std::vector<std::string>& devices,
                       std::shared_ptr<OwnerAppliesPath> path, uint64_t seed = 0)
      : Strategy(distribute::parse_devices(devices), nullptr, seed,
                 distribute::mirrored_placement(), path, path) {}
  std::string_view name() const override { return "OwnerAppliesStrategy"; }
};

}  // namespace est::testing
