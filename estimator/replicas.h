// Replicas: the model_fn calls of one Estimator step, on one replica (no strategy) or on every
// replica of RunConfig's train_distribute / eval_distribute (internal to estimator/).
//
// Without a strategy there is one store and one EstimatorContext, on default_device() (the
// first GPU when there is one, as TF's default placement), and everything runs on the caller's
// thread. Each replica's batch is copied to its device (one copy per tensor per step) before
// model_fn sees it. Under a strategy the strategy makes the replicas (a ReplicaSet of
// EstimatorContexts, one per local replica on its own thread; a store per replica when
// mirrored, restored from the same checkpoint so the copies start equal and stay equal, one
// shared store under central storage). Replica 0's store is the one checkpoints save and
// hooks read. TensorFlow's Estimator semantics:
// - input_fn is called once, with the strategy's InputContext, and yields per-replica
//   batches: one step takes one element per replica (global batch = per-replica batch x
//   num_replicas_in_sync);
// - loss scaling follows tf.compat.v1's Optimizer._scale_loss under the Estimator
//   (tensorflow/python/training/optimizer.py, distribute_lib.py's get_loss_reduction): with
//   more than one replica, each replica's gradients are divided by num_replicas_in_sync
//   before the cross-replica sum UNLESS the loss reduction the train op carries
//   (MinimizeOptions::loss_reduction, else the one recorded on the loss, nn::loss_reduction)
//   is kSum. The gradient path decides (distribute/gradient_path.cpp, loss_reduction_scale);
//   this file passes the train op's reduction along. A loss computed with kNone and then
//   reduced by the user (the multi-worker tutorial's reduce_sum(losses) / global_batch) is divided
//   too, as in TF, so such a loss already scaled by the global batch makes an update
//   1/num_replicas_in_sync of one replica's on the global batch; compute it with kSum to sum
//   instead;
// - the loss reported to hooks and logs follows tensorflow_estimator's estimator.py
//   (_get_loss_reduce_op_for_reporting, _verify_and_create_loss_metric): in training, the
//   replicas' mean when the gradients were divided (and the reduction the spec's loss carries
//   is not kSum: TF reads the graph's last one after model_fn), else their sum; in evaluation
//   always their mean (the loss metric is a mean over every replica's loss);
// - batch normalization uses each replica's own batch statistics; the moving averages are
//   averaged over replicas;
// - the replica threads take on the calling thread's modes for each step (Strategy::run
//   carries them): evaluate's NoGradGuard, so evaluation records no tape, and a BackendGuard.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "estimator/estimator_spec.h"
#include "estimator/params.h"
#include "estimator/specs.h"
#include "nn/losses.h"

namespace est::distribute {
class ReplicaSet;
class Strategy;
}  // namespace est::distribute

namespace est::detail {

// The device of the Estimator's replica without a strategy: config.device, else EST_DEVICE,
// else distribute::local_devices()[0]. InvalidArgumentError for a name that is not a device
// (naming where it came from), FailedPreconditionError for a GPU this process cannot use.
Device default_device(const RunConfig& config);

class Replicas {
 public:
  // `strategy` may be null (no distribution).
  Replicas(std::shared_ptr<distribute::Strategy> strategy, ModeKeys mode, uint64_t seed,
           const Params& params, const RunConfig& config);
  ~Replicas();
  Replicas(const Replicas&) = delete;
  Replicas& operator=(const Replicas&) = delete;

  // This process's replicas (the strategy's local replicas, or 1).
  int size() const;
  bool distributed() const { return strategy_ != nullptr; }
  distribute::Strategy* strategy() const { return strategy_.get(); }
  // The copy that checkpoints save and hooks read (replica 0's).
  nn::VariableStore& store();
  // Every distinct store (one per replica when mirrored, one under central storage).
  std::vector<nn::VariableStore*> stores();
  EstimatorContext& context(int replica = 0);

  // input_fn(mode, input_context): the strategy's InputContext under a strategy, else null.
  data::Dataset make_dataset(const InputFn& input_fn, ModeKeys mode) const;
  // "Using MirroredStrategy with devices (/cpu:0, /cpu:1)" under a strategy.
  void log_strategy(const char* what) const;

  // The next step's elements: one per replica, fewer only when the input ends (empty at its
  // end).
  std::vector<data::Element> next(data::Iterator& iterator) const;

  // model_fn on the first elements.size() replicas (in parallel under a strategy). The first
  // call (`first`) logs "Calling model_fn." once.
  std::vector<EstimatorSpec> call_model_fn(const ModelFn& model_fn,
                                           const std::vector<data::Element>& elements,
                                           ModeKeys mode, bool first);

  // Runs the specs' train ops (one per replica; every replica must have one) through the
  // strategy's gradient path (ReplicaContext::run_train_op; all-reduce: gradients,
  // cross-replica sum, moving averages, the update). TF's loss scaling: replica r's gradients
  // are multiplied by distribute::loss_reduction_scale(specs[r].train_op.loss_reduction()):
  // 1/num_replicas_in_sync unless it is kSum (kNone included: TF divides a user-reduced
  // per-example loss as well).
  // Under several workers the step's loss over every replica of the job comes back in the same
  // collective, and `spec` (from step_spec) takes it, so every worker logs the job's loss.
  void run_train_ops(const std::vector<EstimatorSpec>& specs, EstimatorSpec* spec = nullptr);

  // The step's spec as hooks and logs see it: replica 0's, with the loss over all replicas.
  // Training: their mean when run_train_ops divides the gradients (and the spec's loss's
  // reduction is not kSum), else their sum; evaluation: their mean.
  EstimatorSpec step_spec(const std::vector<EstimatorSpec>& specs) const;

  // Seeds the generator for random ops (dropout) of every replica but the job's first (which
  // keeps the unreplicated stream, saved in checkpoints) from (seed, replica in the job, step),
  // so replicas draw different masks. The training loop calls it before every step: each
  // replica's stream is then a function of the step alone, and a job resumed from a checkpoint
  // draws exactly the masks an uninterrupted one would.
  void seed_replica_generators(int64_t global_step);

 private:
  // Whether the train op's gradients are divided by the replica count (TF's _scale_loss).
  bool scales_loss(const nn::TrainOp& train_op) const;

  std::shared_ptr<distribute::Strategy> strategy_;
  ModeKeys mode_;
  uint64_t seed_;
  std::unique_ptr<distribute::ReplicaSet> set_;   // under a strategy: made by it
  std::unique_ptr<nn::VariableStore> own_store_;  // without one
  std::unique_ptr<EstimatorContext> own_context_;
  std::vector<nn::Reduction> reductions_;  // per replica, its spec's loss's
};

}  // namespace est::detail
