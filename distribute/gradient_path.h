// GradientPath: what a strategy does with a replica's gradients in a training step, the part of
// a strategy that TF spreads over the replica context's merge_call, the cross-device ops and
// the optimizer's apply step.
//
// A strategy is its devices, its cross-device ops, its VariablePlacement, its VariableHome
// (variable_home.h: where the variables live, the replicas' own stores or a parameter server's
// tasks) and its GradientPath. The step function (the custom loop's, or the Estimator's
// model_fn and train op) is the same code under every path; ReplicaContext hands the path the
// train op after the forward pass, gradients given to Optimizer::apply_gradients inside the
// step, and the update's end. The all-reduce path (all_reduce_path(): MirroredStrategy,
// CentralStorage, MultiWorkerMirrored, OneDevice) sums the gradients over every replica of
// every worker and then applies the update where the placement says (every mirrored copy, or
// replica 0 on the shared copy). A parameter-server path is a peer: it pushes a replica's
// gradients to the variables' owners and the owners apply the update.
//
// A strategy passes its path to Strategy's constructor, beside its placement and home;
// Strategy::run makes each replica's ReplicaContext for the step and calls the path through it.
// From the ReplicaContext a path reads the replica (replica_id(), replica_id_in_sync_group(),
// device(), store(), model_context()), its strategy (num_workers(), worker_index(),
// is_chief()), the replica set (every local replica's store and context, the placement) and
// the cross-device ops. The gradients' GradAndVar::name routes each one to its variable's owner.
//
// Threads: every call is made on the replica's own thread, inside Strategy::run, concurrently
// for the local replicas of this process (one thread each; they share this object, so a path
// keeps per-replica state indexed by replica.replica_id() or guarded). Collectives on the
// ReplicaContext (all_reduce, reduce_scaled, sync_step, broadcast_initial_value,
// wait_for_local_replicas) must be called by every local replica (and, for those that cross
// workers, by every worker) in the same order; a path that talks to its owners directly (a
// parameter server) need not use them. An exception thrown by a call ends the step on that
// replica and Strategy::run rethrows it; a call that waits on other replicas must not wait
// forever when one of them failed (the ReplicaContext collectives are abortable).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/optimizer.h"
#include "nn/variable_store.h"
#include "ops/tensor.h"

namespace est::nn {
class ModelContext;
class TrainOp;
}  // namespace est::nn

namespace est::distribute {

class ReplicaContext;

class GradientPath {
 public:
  virtual ~GradientPath() = default;
  virtual std::string_view name() const = 0;  // "all-reduce", for messages

  // A whole training step of `train_op` on `replica`, after its forward pass
  // (ReplicaContext::run_train_op): the gradients (train_op.compute_gradients(), or its
  // overload that reports each gradient as the backward pass completes it) times
  // `gradient_scale` (compute_gradients() gives an embedding table's gradient row-sparse, in
  // GradAndVar::sparse_gradient with `gradient` undefined: a path that moves gradients itself
  // ships those rows or calls densify(); ReplicaContext::sync_step does either, by size);
  // the moving-average updates `ctx` deferred
  // (ContextControl::take_moving_average_updates(): batch norm's statistics, to be averaged over
  // the replicas that stepped together, or pushed with the gradients); then the update: the
  // optimizer is train_op.optimizer() (its clipping included), the variables
  // train_op.variable_names() in train_op.store(), and the update increments global_step.
  // `loss_sum`, when not null, must afterwards hold the sum of train_op.loss() over the
  // replicas that stepped together (the loss a log reports; a path without collectives sums
  // what it has, this replica's own loss when it steps alone).
  // All-reduce: one collective for gradients, statistics and loss (bucketed during the
  // backward pass across workers when the strategy overlaps), then, on replicas that apply
  // updates, the optimizer's update (Optimizer::update) at the global step, which the path
  // advances. Parameter server: push the scaled gradients (and statistics)
  // to each variable's owner, which applies them with the optimizer; its home (the same object,
  // a VariableHome) marks the replica's copy stale for its before_step.
  virtual void apply(ReplicaContext& replica, const nn::TrainOp& train_op, double gradient_scale,
                     nn::ModelContext& ctx, Tensor* loss_sum) = 0;

  // Gradients the step function computed itself and hands to the strategy: through
  // Optimizer::apply_gradients inside the step (before the update), or through
  // ReplicaContext::gradient_transform() (TrainOp::run's transform). Combines them as this
  // path combines gradients (all-reduce: the sum over replicas, no further scale; the loss
  // already carries 1/num_replicas_in_sync), takes replica.model_context()'s deferred
  // moving averages with them. What follows applies them as aggregated
  // (ApplyOptions::experimental_aggregate_gradients false), so nothing combines them twice.
  // A parameter server pushes them here, and the owners apply the update.
  virtual void combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) = 0;

  // Whether the path takes a step's moving averages itself even with one replica (parameter
  // servers: to the variables' owners), so replica contexts defer them
  // (ContextControl::set_defer_moving_averages) and apply or combine receives them.
  virtual bool takes_moving_averages() const { return false; }

  // Whether `replica` applies the combined gradients to its own store with the optimizer
  // (Optimizer::apply_gradients asks, after combine). All-reduce: as the placement says (every
  // mirrored copy; replica 0 under central storage). Parameter server: false (the owner did).
  virtual bool applies_updates(const ReplicaContext& replica) const = 0;

  // After the update of an apply_gradients inside the step, or instead of it on a replica that
  // does not apply it. All-reduce under central storage: wait until replica 0 has updated the
  // shared copy. Parameter server: nothing, or wait for the owners' acknowledgement when
  // training synchronously.
  virtual void after_update(ReplicaContext& replica) = 0;
};

// The all-reduce path: sum over the replicas (of every worker), then the update applied where
// the strategy's placement says. Stateless: a strategy may share it with others.
std::shared_ptr<GradientPath> all_reduce_path();

// The gradient_scale of a TF1 train op whose loss was computed with `loss_reduction`, stepping
// with num_replicas_in_sync replicas (the Estimator's steps; gradient_path.cpp says why):
// 1 / num_replicas_in_sync unless the reduction is kSum, 1 with one replica.
double loss_reduction_scale(nn::Reduction loss_reduction, int num_replicas_in_sync);

}  // namespace est::distribute
