// PsGradientPath: the GradientPath (distribute/gradient_path.h) of ParameterServerStrategy on a
// worker: the gradients go to the ps tasks that own the variables, the owners apply the update
// with the job's optimizer, and the reply carries the fresh values, written into the replica's
// store (a cache of the owners' variables): one round trip per ps task per step.
//
// Asynchronous, as TF1's between-graph replication without SyncReplicasOptimizer: each worker
// steps on its own, the owners apply pushes in the order they arrive, and the global step (on
// ps 0) counts every worker's updates. As a model_fn creates a trainable variable, the chief
// initializes it on its owner (with the checkpoint's value when it restored one), and every
// other worker takes the owner's value, waiting for the chief when it is not there yet. Clipping
// (the optimizer's clip_by_global_norm) runs on the worker, over the gradients of the whole
// model, before the push, as TF's graph clips them on the worker. What stays on the worker:
// non-trainable variables (batch norm's moving statistics are updated locally from the
// worker's batches; the chief's are the ones its checkpoints save).
//
// Synchronous on request (`sync`: SyncReplicasOptimizer's semantics): the step's push goes into
// the owners' accumulators and the worker waits for its token before the next step
// (distribute/ps/ps_sync_step.h).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "distribute/gradient_path.h"
#include "distribute/ps/ps_sync_step.h"
#include "distribute/ps/ps_variables.h"

namespace est::distribute {

class PsGradientPath final : public GradientPath {
 public:
  // `variables` must outlive the path. `wait_for_chief`: how long a worker waits for the chief
  // to initialize a variable. `sync`: train synchronously (`task` names this task then).
  PsGradientPath(PsVariables& variables, bool is_chief, std::chrono::milliseconds wait_for_chief,
                 std::optional<SyncReplicasOptions> sync = std::nullopt, std::string task = {});

  std::string_view name() const override { return "push to the ps tasks"; }
  void apply(ReplicaContext& replica, const nn::TrainOp& train_op, double gradient_scale,
             nn::ModelContext& ctx, Tensor* loss_sum) override;
  void combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) override;
  bool applies_updates(const ReplicaContext& /*replica*/) const override { return false; }
  void after_update(ReplicaContext& /*replica*/) override {}
  void initialize_variable(ReplicaContext& replica, const std::string& name,
                           Tensor& value) override;
  void before_checkpoint(nn::VariableStore& store) override;
  bool wants_restored_state() const override { return is_chief_; }
  void restore_state(const std::vector<std::pair<std::string, Tensor>>& values) override;

 private:
  // Pushes `grads` (already scaled and clipped) and writes the fresh values into `store`.
  void push(nn::VariableStore& store, std::vector<nn::GradAndVar>& grads);
  // global_step on ps 0 (the chief's value: 0, or the restored step), once.
  void place_global_step(nn::VariableStore& store);

  PsVariables* variables_;
  bool is_chief_;
  std::chrono::milliseconds wait_for_chief_;
  std::mutex mutex_;  // the local replicas share the connections
  bool global_step_placed_ = false;
  std::unique_ptr<PsSyncStep> sync_;  // null: asynchronous
};

}  // namespace est::distribute
