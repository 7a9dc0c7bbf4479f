// Strategy: how a training step is replicated over local devices and worker processes, as
// tf.distribute.Strategy.
//
// Every strategy is the same machinery: one replica per local device, each replica on its own
// persistent thread with its own ModelContext, and cross-device ops that reduce over the local
// replicas and then (multi-worker) over the processes of the job. Two interfaces make the
// strategies peers: a VariablePlacement (variable_placement.h) says how the replicas' stores
// are laid out (mirrored: a VariableStore per replica; central: one shared store), a
// VariableHome (variable_home.h) where the variables live (those stores, or a parameter
// server's tasks) and a GradientPath (gradient_path.h) what a step does with the gradients
// (all_reduce_path(): the sum over every replica of every worker, then the update applied where the
// placement says, the copies kept identical because every replica applies the same sums and
// averaged moving statistics, and because across processes the chief's initial values are broadcast
// before the first update). The strategy owns the replicas: its own set for the custom training
// loop, and more sets made by make_replicas() for callers with their own contexts (the Estimator's
// train and eval loops). The subclasses choose the devices, the cross-device ops, the placement,
// the gradient path and the topology (workers, this worker's index, the chief). The
// custom-training-loop API reads as in TensorFlow:
//   PerReplica losses = strategy.run([&](ReplicaContext& replica) {
//     ModelContext& ctx = replica.model_context();
//     ctx.begin_call();
//     Tensor loss = ... / replica.num_replicas_in_sync();  // scaled by the global batch
//     replica.run_train_op(optimizer.minimize(loss, ctx));  // the gradient path's step
//     return loss;
//   }, inputs);
//   double total = strategy.reduce(ReduceOp::kSum, losses).item();
// Inside the step, optimizer.apply_gradients with the replica's ModelContext (and so TrainOp::run)
// goes through the same gradient path: the replica context hands it the gradients first, as in
// TF's replica context. The step's replica reaches the optimizer through that ModelContext
// (which run() gives it for the step); gradients the step summed itself (all_reduce_gradients)
// go to apply_gradients(ctx, sums, {.experimental_aggregate_gradients = false}), as in TF2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/element.h"
#include "data/input_context.h"
#include "distribute/collectives/cross_device_ops.h"
#include "distribute/gradient_path.h"
#include "distribute/variable_home.h"
#include "distribute/variable_placement.h"
#include "nn/model_context.h"
#include "nn/optimizer.h"
#include "nn/train_op.h"

namespace est::data {
class Dataset;
}

namespace est::distribute {

using ops::Device;
using ops::Tensor;

class AbortableBarrier;
class DistributedDataset;
class ReplicaPool;
class Strategy;

// Makes replica `replica`'s model context on `store` (its own, or the shared one).
using ContextFactory =
    std::function<std::unique_ptr<nn::ModelContext>(nn::VariableStore& store, int replica)>;

// The variables and model contexts of one set of replicas: the stores as the placement makes
// them (a store per replica when mirrored, one for all under central storage), and a context
// per replica. Made by a strategy (make_replicas).
class ReplicaSet {
 public:
  // `stores` as `placement` made them; `contexts` one per replica, each on its store.
  ReplicaSet(std::shared_ptr<const VariablePlacement> placement,
             std::vector<std::unique_ptr<nn::VariableStore>> stores,
             std::vector<std::unique_ptr<nn::ModelContext>> contexts);
  int size() const { return static_cast<int>(contexts_.size()); }
  // Replica r's store (the same one for every replica under central storage). Replica 0's is
  // the copy checkpoints save.
  nn::VariableStore& store(int replica);
  nn::ModelContext& context(int replica);
  // Every distinct store.
  std::vector<nn::VariableStore*> stores();
  const VariablePlacement& placement() const { return *placement_; }

 private:
  std::shared_ptr<const VariablePlacement> placement_;
  std::vector<std::unique_ptr<nn::VariableStore>> stores_;   // [replicas], or [1] central
  std::vector<std::unique_ptr<nn::ModelContext>> contexts_;  // [replicas]
};

// Where the local replicas of a strategy meet inside a step: their threads' barrier, the slots
// in which each deposits a collective's inputs and outputs, and the value replica 0 received
// for the others (the chief's initial value of a variable). The strategy owns one and gives
// each step's ReplicaContexts a reference to it.
struct ReplicaRendezvous {
  AbortableBarrier* barrier = nullptr;
  std::vector<std::vector<Tensor>*> inputs;   // [local replicas], during a collective
  std::vector<std::vector<Tensor>*> outputs;  // [local replicas], their results
  Tensor received;
};

// One value per replica, indexed by replica id (tf.distribute's PerReplica).
struct PerReplica {
  std::vector<Tensor> values;  // [num_replicas_in_sync]
  size_t size() const { return values.size(); }
  const Tensor& operator[](size_t replica) const { return values[replica]; }
};

// What a step function sees while it runs on one replica. It is also the replica's
// nn::CrossReplicaSync while the step runs (nn::ContextControl::replica_sync() of its model
// context), so Optimizer::apply_gradients inside the step (from TrainOp::run, or with gradients
// from ops::gradients) goes through the strategy's GradientPath (all-reduce: the sum over replicas,
// then the update as the placement says), as apply_gradients in TF's replica context does.
// The collectives below are what a GradientPath composes a step from.
class ReplicaContext final : public nn::CrossReplicaSync {
 public:
  // Made by Strategy::run for one replica's step, with the strategy's rendezvous, cross-device
  // ops and gradient path.
  ReplicaContext(Strategy& strategy, ReplicaRendezvous& rendezvous,
                 CrossDeviceOps& cross_device_ops, GradientPath& gradient_path,
                 VariableHome& variable_home, ReplicaSet& replicas, int replica_id,
                 const data::Element& input)
      : strategy_(&strategy),
        rendezvous_(&rendezvous),
        cross_device_ops_(&cross_device_ops),
        gradient_path_(&gradient_path),
        variable_home_(&variable_home),
        replicas_(&replicas),
        replica_id_(replica_id),
        input_(&input) {}

  // This replica among the replicas of this process (indexes per-replica inputs and stores).
  int replica_id() const { return replica_id_; }
  // Among all replicas of the job: worker_index * local replicas + replica_id()
  // (tf.distribute's replica_id_in_sync_group).
  int replica_id_in_sync_group() const;
  int num_replicas_in_sync() const;
  Device device() const;
  nn::ModelContext& model_context();
  nn::VariableStore& store();
  // This replica's input (empty when run() was given none).
  const data::Element& input() const { return *input_; }
  // The strategy running the step, the replica set it runs on (every local replica's store and
  // context, and their placement), and its cross-device ops.
  Strategy& strategy() const { return *strategy_; }
  ReplicaSet& replica_set() const { return *replicas_; }
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }

  // Collectives: every replica (of every worker) must call them, in the same order, with lists
  // of the same shapes. Afterwards `tensors` holds the reduction over all replicas: fresh
  // buffers that this process's replicas share (they are threads of one process), so read them,
  // never write into them in place.
  void all_reduce(ReduceOp op, std::vector<Tensor>& tensors);
  // The same with a factor per entry: entry i becomes the sum over replicas times factors[i].
  void reduce_scaled(std::vector<Tensor>& tensors, const std::vector<double>& factors);
  // Sums the gradients (times `scale`) and averages the values of `updates` over replicas, in
  // one collective. `extra` (optional) is summed in the same collective. Applies nothing.
  void sync_step(std::vector<nn::GradAndVar>& grads_and_vars, double scale,
                 std::vector<nn::MovingAverageUpdate>& updates, Tensor* extra = nullptr);
  // Sums the gradients over replicas (the loss is already scaled by the global batch) and
  // averages the moving statistics model_context() deferred, applying them where the placement
  // applies updates. Apply the sums with apply_gradients(model_context(), sums,
  // {.experimental_aggregate_gradients = false}) (no second sum).
  void all_reduce_gradients(std::vector<nn::GradAndVar>& grads_and_vars);
  // Several workers: the chief's `value` of variable `name` (which every worker must be
  // creating: InvalidArgumentError otherwise) in every replica's `value`; nothing in one
  // process.
  void broadcast_initial_value(const std::string& name, Tensor& value);
  // Waits until every local replica has called it.
  void wait_for_local_replicas();
  // "all-reduce at step 812", for messages.
  std::string describe(const char* collective);

  // A whole training step of `train_op` on this replica, through the strategy's GradientPath
  // (gradient_path.h; all-reduce: its gradients times `gradient_scale`, summed over replicas;
  // the moving averages `ctx` deferred (batch norm's statistics, computed per replica) averaged
  // over replicas; then the optimizer's update: on every replica's copy (mirrored) or once on
  // the shared copy (central storage, after which every replica waits until it is done)).
  // `ctx` defaults to this replica's model_context(); with several replicas in sync it must
  // defer its moving averages (FailedPreconditionError). The custom loop scales the loss by the
  // global batch itself (gradient_scale 1); the Estimator passes loss_reduction_scale of the
  // train op's loss reduction (TF1's rule, decided in gradient_path.cpp).
  // `loss_sum`, when given, afterwards holds the sum of the train op's loss over every replica
  // that stepped with this one (all-reduce: of every worker, in the same collective), for the
  // loss a log reports.
  void run_train_op(const nn::TrainOp& train_op, double gradient_scale = 1.0,
                    nn::ModelContext* ctx = nullptr, Tensor* loss_sum = nullptr);
  // The same as a TrainOp transform (`train_op.run(replica.gradient_transform())`): the
  // gradient path combines the gradients in the transform (GradientPath::combine), the
  // optimizer updates. It refers to this context: use it only inside the step function that
  // received it.
  nn::GradientTransform gradient_transform();
  // Whether this replica applies updates to its own store (the gradient path's answer;
  // all-reduce: always with mirrored variables, only replica 0 under central storage).
  bool applies_updates() const;

  // nn::CrossReplicaSync, called by Optimizer::apply_gradients and ModelContext::get_variable:
  // the gradient path's combine (when `aggregate`), applies_updates and after_update;
  // the variable home's initialize_variable and read_variable.
  bool synchronize(std::vector<nn::GradAndVar>& grads_and_vars, bool aggregate) override;
  void after_update() override;
  void initialize_variable(const std::string& name, Tensor& value) override;
  void read_variable(const std::string& name, Tensor& value, const Tensor* rows) override;

 private:
  Strategy* strategy_;
  ReplicaRendezvous* rendezvous_;
  CrossDeviceOps* cross_device_ops_;
  GradientPath* gradient_path_;
  VariableHome* variable_home_;
  ReplicaSet* replicas_;
  int replica_id_;
  const data::Element* input_;

  // Runs `work` on replica 0's thread while the other local replicas wait at the barrier.
  void on_replica_zero(const std::function<void()>& work);
  // `tensors` (this replica's) summed over the workers in place; through host copies when the
  // cross-device ops reduce host buffers only.
  void reduce_across_workers(std::vector<Tensor>& tensors);
};

using StepFn = std::function<Tensor(ReplicaContext&)>;

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  virtual std::string_view name() const = 0;  // "MirroredStrategy"
  // "MirroredStrategy with devices (/cpu:0, /cpu:1)", for log lines.
  virtual std::string description() const;

  // This process's devices, one replica each.
  const std::vector<Device>& devices() const { return devices_; }
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  // Replicas that step together: local replicas x workers.
  int num_replicas_in_sync() const { return num_local_replicas() * num_workers(); }
  int num_workers() const { return cross_device_ops_->num_workers(); }
  int worker_index() const { return cross_device_ops_->worker_index(); }
  // Whether this process is the job's chief (writes checkpoints and summaries).
  bool is_chief() const { return is_chief_; }
  // The job's input pipelines and this task's (input_context): one per worker stepping
  // together here; ParameterServerStrategy's asynchronous workers have one each as well.
  virtual int64_t num_input_pipelines() const { return num_workers(); }
  virtual int64_t input_pipeline_id() const { return worker_index(); }
  // Whether this task trains in a job with other tasks (workers stepping together, or workers
  // sharing variables on ps tasks); a task of a cluster without it trains alone.
  virtual bool trains_with_other_tasks() const { return num_workers() > 1; }
  const CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }
  int threads_per_replica() const { return threads_per_replica_; }
  // Whether, with one local replica per worker, each bucket's reduction across workers starts
  // during the backward pass (on CollectiveAllReduce's communication thread) rather than after
  // it: when this process has a core of the host beyond one to itself (its share is cores /
  // local processes), since a communication thread on the only core just takes turns with the
  // compute (2 workers x 1 core: 0.72-0.74 of one process overlapped, 0.79-0.83 not;
  // bench/multi_worker_bench). EST_OVERLAP_GRADIENT_REDUCTION=1 or 0 decides instead.
  bool overlaps_gradient_reduction() const { return overlap_reduction_; }
  // Where the variables live and which replicas update them (mirrored, central storage).
  const VariablePlacement& placement() const { return *placement_; }
  // Whether each replica has its own copy of the variables (mirrored, not central storage).
  bool variables_mirrored() const { return !placement_->shared(); }
  // What a step does with the replicas' gradients (all-reduce; a parameter server's push and
  // pull): every replica step of run() goes through it (gradient_path.h).
  GradientPath& gradient_path() const { return *gradient_path_; }
  // Where the variables live (the replicas' stores; a parameter server's tasks): run() calls
  // its before_step, the replicas' model contexts its initialize_variable and read_variable,
  // the Estimator its variables_ready, before_checkpoint and restore_state (variable_home.h).
  VariableHome& variable_home() const { return *variable_home_; }

  // The InputContext of input pipeline `pipeline_id` (one per worker; default: this worker's):
  // InvalidArgumentError outside [0, num_workers).
  data::InputContext input_context(std::optional<int64_t> pipeline_id = std::nullopt) const;

  // A new set of replicas, with contexts from `factory` (configured as
  // configure_replica_context says). The strategy's own set (for run() without one) is made
  // with plain ModelContexts seeded with the strategy's seed.
  std::unique_ptr<ReplicaSet> make_replicas(const ContextFactory& factory) const;
  ReplicaSet& replicas() { return *replicas_; }

  // Runs step_fn once on every local replica (of `replicas`, default the strategy's own), in
  // parallel, and returns what each returned. `per_replica_inputs`, when given, has one element
  // per local replica (InvalidArgumentError). Each replica step runs with the calling thread's
  // modes (NoGradGuard, BackendGuard), after the gradient path's before_step on its replica.
  PerReplica run(const StepFn& step_fn, const std::vector<data::Element>& per_replica_inputs = {});
  PerReplica run(ReplicaSet& replicas, const StepFn& step_fn,
                 const std::vector<data::Element>& per_replica_inputs = {});

  // Combines per-replica values: element-wise over replicas (of every worker), or, with `axis`,
  // also over that axis of every value (kMean then divides by the total length of the axis,
  // i.e. the mean over the global batch). No gradient is recorded. Under several workers every
  // worker must call it (it is a collective).
  Tensor reduce(ReduceOp op, const PerReplica& value, std::optional<int> axis = std::nullopt);

  // Splits each global batch of `dataset` into per-replica batches. With several workers the
  // dataset's AutoShardPolicy (Dataset::with_options; default AUTO: by file, else by data)
  // decides which part each worker reads: see distributed_dataset.h.
  DistributedDataset distribute_dataset(const data::Dataset& dataset) const;

  // Cross-replica all-reduce of per-replica gradient lists (outside replica context), in place.
  void all_reduce_gradients(ReduceOp op, std::vector<std::vector<Tensor>>& per_replica);

  // Sums `values` (float32/float64, in place) over the workers of the job (a collective under
  // several workers; nothing in one process).
  void sum_across_workers(std::vector<Tensor>& values, const std::string& what);
  // Every worker's `mine`, by worker index (a collective under several workers).
  std::vector<std::string> all_gather_workers(const std::string& mine, const std::string& what);
  // Copies the chief's bytes of `values` into every worker's (a collective under several
  // workers; nothing in one process).
  void broadcast_from_chief(std::vector<Tensor>& values, const std::string& what);
  // Every worker of the job waits here until all have arrived (nothing in one process): what
  // comes after a barrier on one worker sees what came before it on every other (the chief's
  // checkpoint on disk before the others read it). Every worker must call it, in the same
  // order. It never waits forever: a worker that does not arrive in time, or a job that fails
  // meanwhile (a peer that died or reported an error), ends it with an error naming `what`.
  // MultiWorkerMirroredStrategy meets at the coordination service; this default sums a token
  // across the workers (bounded as the cross-device ops' collectives are).
  virtual void barrier(std::string_view what);

  // Tells the other workers that this one failed (multi-worker; nothing in one process), so
  // that they stop at once with its error. Never throws.
  virtual void report_error(const std::exception& /*error*/) noexcept {}

  // Makes a replica's model context fit this strategy: with several replicas (or a gradient
  // path that takes them) it defers its moving averages (averaged over replicas by the step,
  // or sent to their owners), and under central storage it keeps
  // its initializer stream in step with the other replicas on the shared store.
  void configure_replica_context(nn::ModelContext& ctx) const;

  // Replica `replica`'s variables and model context in the strategy's own set.
  nn::VariableStore& store(int replica);
  nn::ModelContext& model_context(int replica);

 protected:
  // `devices` must be non-empty and distinct, and GPU devices need the CUDA backend
  // (InvalidArgumentError naming the device otherwise). `cross_device_ops` (null:
  // ReductionToOneDevice) also says how many workers there are and which one this is. `seed`
  // seeds every replica's ModelContext identically. `local_processes`: processes sharing this
  // host's cores (each replica takes ops::threads_for_local_processes(local_processes) /
  // replicas threads). `placement` (null: mirrored_placement()) places the variables;
  // `gradient_path` (null: all_reduce_path()) takes the gradients of each step;
  // `variable_home` (null: replicas_home()) is where the variables live.
  Strategy(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> cross_device_ops,
           uint64_t seed, std::shared_ptr<const VariablePlacement> placement = nullptr,
           std::shared_ptr<GradientPath> gradient_path = nullptr,
           std::shared_ptr<VariableHome> variable_home = nullptr, bool is_chief = true,
           int local_processes = 1);

 private:
  void check_replica(int replica, const char* where) const;

  std::vector<Device> devices_;
  std::shared_ptr<CrossDeviceOps> cross_device_ops_;
  std::shared_ptr<const VariablePlacement> placement_;
  std::shared_ptr<GradientPath> gradient_path_;
  std::shared_ptr<VariableHome> variable_home_;
  bool is_chief_;
  uint64_t seed_;
  int threads_per_replica_;
  bool overlap_reduction_ = false;
  std::unique_ptr<ReplicaSet> replicas_;  // the strategy's own set
  std::unique_ptr<ReplicaPool> pool_;
  ReplicaRendezvous rendezvous_;  // where the replicas of a step meet (pool_'s barrier)
};

// The default devices of MirroredStrategy, CentralStorageStrategy and
// MultiWorkerMirroredStrategy, and the Estimator's device without a strategy: every local GPU
// ("/gpu:0", "/gpu:1", ...) when the CUDA backend is built and a GPU is visible (cudart honours
// CUDA_VISIBLE_DEVICES, so CUDA_VISIBLE_DEVICES="" means the CPU), else one CPU ({"/cpu:0"}),
// as TensorFlow's MirroredStrategy.
std::vector<std::string> local_devices();

// Whether every device is a GPU (and there is one): what NCCL needs.
bool all_gpus(const std::vector<Device>& devices);

// `element` with every tensor on `device`: one ops::copy_to per tensor not there yet (no
// gradient recorded; host tensors stay as they are for a CPU device). What a replica's input batch
// goes through before its step sees it.
data::Element copy_to_device(const data::Element& element, Device device);

// Parses TensorFlow device names ("/cpu:0", "/device:CPU:1"); the parse error for bad ones.
std::vector<Device> parse_devices(const std::vector<std::string>& names);

}  // namespace est::distribute
