// PsGradientPath: the GradientPath (distribute/gradient_path.h) of ParameterServerStrategy on a
// worker, and its VariableHome (distribute/variable_home.h): the gradients go to the ps tasks
// that own the variables, the owners apply the update with the job's optimizer, and the reply
// carries the fresh values, written into the replica's store (a cache of the owners'
// variables): one round trip per ps task per step. One object plays both parts because the
// push and the reads share the cache's state (which copies are stale, which tables are read by
// rows, which initial values the chief has not sent yet).
//
// The push overlaps the backward pass: a gradient of at least `push_ahead_bytes` goes to its
// owner as soon as the backward pass completes it (PsVariables::stage, a frame without a reply),
// so its transfer, and the owner's receiving and decoding it, run while the worker computes the
// remaining gradients; the step's one request per ps task then carries the rest, and the owner
// applies all of them in one update, exactly as if they had come together. Values are pulled in
// that same round trip (the reply), so the next step reads values at least as new as this
// worker's own push, and the store holds them once the step returns (a global_step read, a
// checkpoint, the custom loop's next statement see this step's update). Not done when the
// optimizer clips by global norm (that needs every gradient first) nor for row-sparse
// gradients (embeddings), which go with the request.
//
// Asynchronous, as TF1's between-graph replication without SyncReplicasOptimizer: each worker
// steps on its own, the owners apply pushes in the order they arrive, and the global step (on
// ps 0) counts every worker's updates. Every variable a model_fn creates is placed on a ps task
// (as replica_device_setter places every variable); the chief initializes them on their owners
// once the first model_fn call created them and the restore, the warm start and
// Scaffold.init_fn set their values (variables_ready, or else its first push or checkpoint),
// and every other worker takes the owner's value at its first read, waiting for the chief when
// it is not there yet (a table read by rows: only the rows read, never the whole table). Clipping
// (the optimizer's clip_by_global_norm) runs on the worker, over the gradients of the whole model,
// before the push, as TF's graph clips them on the worker. Batch norm's moving statistics
// (non-trainable) are updated on their owner: each worker pushes its batch's statistics with its
// gradients and the owner applies the moving average (TF colocates assign_moving_average with the
// variable), so the chief's checkpoints hold every worker's.
//
// Embedding tables move by rows, as TF's embedding_lookup gathers on the ps task and pushes
// IndexedSlices: a variable that the model has read only through lookups
// (ModelContext::get_variable_rows) is left out of the step's pull, and each lookup pulls just
// the rows it reads before it reads them; its gradient stays row-sparse (duplicates summed) and
// the owner applies it with the optimizer's sparse update. Which variables those are is learnt
// as the model reads them: every variable is pulled whole until it has been read by rows, and
// a whole read of one (a dense use of the table) pulls it whole there and then, and from then
// on with every step.
//
// Synchronous on request (`sync`: SyncReplicasOptimizer's semantics): the step's push goes into
// the owners' accumulators and the worker waits for its token before the next step
// (distribute/ps/ps_sync_step.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
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
#include "distribute/variable_home.h"
#include "nn/context_control.h"
#include "nn/model_context.h"

namespace est::distribute {

class PsGradientPath final : public GradientPath, public VariableHome {
 public:
  // `variables` must outlive the path. `wait_for_chief`: how long a worker waits for the chief
  // to initialize a variable. `push_ahead_bytes`: see above; 0 sends every gradient with the
  // step's request, after the backward pass. `sync`: train synchronously (`task` names this
  // task then; gradients are not pushed ahead).
  PsGradientPath(PsVariables& variables, bool is_chief, std::chrono::milliseconds wait_for_chief,
                 size_t push_ahead_bytes, std::optional<SyncReplicasOptions> sync = std::nullopt,
                 std::string task = {});

  // GradientPath.
  std::string_view name() const override { return "push to the ps tasks"; }
  void apply(ReplicaContext& replica, const nn::TrainOp& train_op, double gradient_scale,
             nn::ModelContext& ctx, Tensor* loss_sum) override;
  void combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) override;
  bool takes_moving_averages() const override { return true; }
  bool applies_updates(const ReplicaContext& /*replica*/) const override { return false; }
  void after_update(ReplicaContext& /*replica*/) override {}
  // VariableHome.
  void initialize_variable(ReplicaContext& replica, const std::string& name,
                           Tensor& value) override;
  void variables_ready(nn::VariableStore& store) override;
  void read_variable(ReplicaContext& replica, const std::string& name, Tensor& value,
                     const Tensor* rows) override;
  void before_checkpoint(nn::VariableStore& store) override;
  bool wants_restored_state() const override { return is_chief_; }
  void restore_state(const std::vector<std::pair<std::string, Tensor>>& values) override;

 private:
  // Pushes `grads` (already scaled and clipped) and the moving averages, and writes the fresh
  // values into `store`, but those of the tables read by rows only, which become stale; under
  // mutex_.
  void push(nn::VariableStore& store, std::vector<nn::GradAndVar>& grads,
            const std::vector<nn::MovingAverageUpdate>& moving_averages);
  // The chief: the values of the variables created since the last call, to their owners.
  void send_initial_values(const nn::VariableStore& store);
  // `updates` of placed variables, named for their owners; the others are applied here.
  std::vector<PsMovingAverage> owned_moving_averages(
      const nn::VariableStore& store, const std::vector<nn::MovingAverageUpdate>& updates) const;
  // train_op's gradients times `scale`, those of push_ahead_bytes_ or more (dense) staged to
  // their owners as the backward pass completes them; returns the others, in store order.
  // Under mutex_.
  std::vector<nn::GradAndVar> gradients_pushing_ahead(const nn::TrainOp& train_op, double scale);
  // global_step on ps 0 (the chief's value: 0, or the restored step), once.
  void place_global_step(nn::VariableStore& store);

  PsVariables* variables_;
  bool is_chief_;
  std::chrono::milliseconds wait_for_chief_;
  size_t push_ahead_bytes_;
  std::mutex mutex_;  // the local replicas share the connections
  bool global_step_placed_ = false;
  std::vector<std::string> uninitialized_;  // the chief: placed, not sent to the owners yet
  std::set<std::string> read_whole_;        // variables the model has read whole
  std::set<std::string> read_by_rows_;      // the others it has read: rows only, not pulled whole
  // Per replica store: of those, the ones pushed since the store's last whole pull.
  std::map<const nn::VariableStore*, std::set<std::string>> stale_;
  std::unique_ptr<PsSyncStep> sync_;  // null: asynchronous
};

}  // namespace est::distribute
