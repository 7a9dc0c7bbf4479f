// Strategy: how a training step is replicated over local devices, as tf.distribute.Strategy.
//
// Every in-process strategy is the same machinery: one replica per device, each replica on
// its own persistent thread with its own ModelContext. Variables are either mirrored (each
// replica has its own VariableStore, created from the same seed and kept identical because
// every replica applies the same all-reduced gradients and averaged moving statistics) or
// central (one VariableStore shared by all replicas; the update is applied once, by replica 0,
// after the gradients are summed). The subclasses choose the devices, the cross-device ops and
// the placement. The custom-training-loop API reads as in TensorFlow:
//   PerReplica losses = strategy.run([&](ReplicaContext& replica) {
//     ModelContext& ctx = replica.model_context();
//     ctx.begin_call();
//     Tensor loss = ... / replica.num_replicas_in_sync();  // scaled by the global batch
//     replica.run_train_op(optimizer.minimize(loss, ctx));  // all-reduce (sum), the update
//     return loss;
//   }, inputs);
//   double total = strategy.reduce(ReduceOp::kSum, losses).item();
// Inside the step, optimizer.apply_gradients (and so TrainOp::run) is synchronized as well:
// the replica context sums the gradients over replicas first, as in TF's replica context.
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
#include "distribute/cross_device_ops.h"
#include "nn/model_context.h"
#include "nn/optimizer.h"
#include "nn/train_op.h"

namespace est::data {
class Dataset;
}

namespace est::distribute {

using ops::Device;
using ops::Tensor;

class DistributedDataset;
class ReplicaPool;
class Strategy;

// One value per replica, indexed by replica id (tf.distribute's PerReplica).
struct PerReplica {
  std::vector<Tensor> values;  // [num_replicas_in_sync]
  size_t size() const { return values.size(); }
  const Tensor& operator[](size_t replica) const { return values[replica]; }
};

// What a step function sees while it runs on one replica's thread. It is also the thread's
// nn::CrossReplicaSync while the step runs, so Optimizer::apply_gradients inside the step (from
// TrainOp::run, or with gradients from ops::gradients) sums the gradients over replicas and
// updates the variables as the strategy places them, as apply_gradients in TF's replica
// context does.
class ReplicaContext final : public nn::CrossReplicaSync {
 public:
  int replica_id() const { return replica_id_; }
  int num_replicas_in_sync() const;
  Device device() const;
  nn::ModelContext& model_context();
  nn::VariableStore& store();
  // This replica's input (empty when run() was given none).
  const data::Element& input() const { return *input_; }

  // Collectives: every replica must call them, in the same order, with lists of the same
  // shapes. Afterwards `tensors` holds the reduction over all replicas: fresh buffers that all
  // replicas share (the replicas are threads of one process), so read them, never write into
  // them in place.
  void all_reduce(ReduceOp op, std::vector<Tensor>& tensors);
  // Sums the gradients over replicas (the loss is already scaled by the global batch) and
  // averages the moving statistics model_context() deferred, applying them where this replica
  // applies updates. The next apply_gradients on this replica then applies the sums as they
  // are (no second sum).
  void all_reduce_gradients(std::vector<nn::GradAndVar>& grads_and_vars);
  // A whole training step of `train_op` on this replica: its gradients times
  // `gradient_scale`, summed over replicas; the moving averages `ctx` deferred (batch norm's
  // statistics, computed per replica) averaged over replicas; then the optimizer's update:
  // on every replica's copy (mirrored) or once on the shared copy (central storage, after which
  // every replica waits until it is done). `ctx` defaults to this replica's model_context();
  // the Estimator passes its own. The custom loop scales the loss by the global batch itself
  // (gradient_scale 1); the Estimator passes 1/num_replicas_in_sync for a mean-type loss.
  void run_train_op(const nn::TrainOp& train_op, double gradient_scale = 1.0,
                    nn::ModelContext* ctx = nullptr);
  // The same as a TrainOp transform (`train_op.run(replica.gradient_transform())`): the sum
  // and the moving averages happen in the transform, the update in the optimizer. It refers to
  // this context: use it only inside the step function that received it.
  nn::GradientTransform gradient_transform();
  // Whether this replica applies updates: always with mirrored variables, only replica 0
  // under central storage.
  bool applies_updates() const;

  // nn::CrossReplicaSync, called by Optimizer::apply_gradients.
  bool synchronize(std::vector<nn::GradAndVar>& grads_and_vars) override;
  void after_update() override;

 private:
  friend class Strategy;
  ReplicaContext(Strategy& strategy, int replica_id, const data::Element& input)
      : strategy_(&strategy), replica_id_(replica_id), input_(&input) {}
  Strategy* strategy_;
  int replica_id_;
  const data::Element* input_;
  bool presynced_ = false;  // this step's gradients are already summed (run_train_op, transform)

  // Applies this replica's share of the averaged moving statistics and marks the gradients as
  // summed, after sync_step.
  void finish_sync(std::vector<nn::MovingAverageUpdate>& updates);
  // The collective behind all_reduce: entry i becomes the sum over replicas times factors[i].
  void reduce_scaled(std::vector<Tensor>& tensors, const std::vector<double>& factors);
  // Sums the gradients (times `scale`) and averages the values of `updates`, in one collective.
  void sync_step(std::vector<nn::GradAndVar>& grads_and_vars, double scale,
                 std::vector<nn::MovingAverageUpdate>& updates);
};

using StepFn = std::function<Tensor(ReplicaContext&)>;

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  virtual std::string_view name() const = 0;  // "MirroredStrategy"
  // "MirroredStrategy with devices (/cpu:0, /cpu:1)", for log lines.
  std::string description() const;

  const std::vector<Device>& devices() const { return devices_; }
  int num_replicas_in_sync() const { return static_cast<int>(devices_.size()); }
  bool is_chief() const { return true; }  // one process: always the chief
  int64_t num_input_pipelines() const { return 1; }
  CrossDeviceOps cross_device_ops() const { return cross_device_ops_; }
  int threads_per_replica() const { return threads_per_replica_; }
  // Mirrored variables (a copy per replica) or central storage (one copy, shared).
  bool variables_mirrored() const { return placement_ == VariablePlacement::kMirrored; }

  // The InputContext for input pipeline `pipeline_id` (only 0 in one process:
  // InvalidArgumentError otherwise).
  data::InputContext input_context(int64_t pipeline_id = 0) const;

  // Runs step_fn once on every replica, in parallel, and returns what each returned.
  // `per_replica_inputs`, when given, has one element per replica (InvalidArgumentError).
  PerReplica run(const StepFn& step_fn, const std::vector<data::Element>& per_replica_inputs = {});

  // Combines per-replica values: element-wise over replicas, or, with `axis`, also over that
  // axis of every value (kMean then divides by the total length of the axis, i.e. the mean
  // over the global batch). No gradient is recorded.
  Tensor reduce(ReduceOp op, const PerReplica& value, std::optional<int> axis = std::nullopt) const;

  // Splits each global batch of `dataset` into num_replicas_in_sync per-replica batches.
  DistributedDataset distribute_dataset(const data::Dataset& dataset) const;

  // Cross-replica all-reduce of per-replica gradient lists (outside replica context), in place
  // with this strategy's cross-device ops.
  void all_reduce_gradients(ReduceOp op, std::vector<std::vector<Tensor>>& per_replica) const;

  // Makes a replica's model context fit this strategy: with several replicas it defers its
  // moving averages (averaged over replicas by the step), and under central storage it keeps
  // its initializer stream in step with the other replicas on the shared store. The strategy's
  // own contexts get this; a caller with its own contexts (the Estimator) calls it on them.
  void configure_replica_context(nn::ModelContext& ctx) const;

  // Replica `replica`'s variables and model context (the mirrored copies; under central
  // storage every replica's store is the same one).
  nn::VariableStore& store(int replica);
  nn::ModelContext& model_context(int replica);

 protected:
  enum class VariablePlacement : uint8_t { kMirrored, kCentral };
  // `devices` must be non-empty and distinct, and GPU devices need the CUDA backend
  // (InvalidArgumentError naming the device otherwise). `seed` seeds every
  // replica's ModelContext identically, so mirrored variables start equal.
  Strategy(std::vector<Device> devices, CrossDeviceOps cross_device_ops, uint64_t seed,
           VariablePlacement placement = VariablePlacement::kMirrored);

 private:
  friend class ReplicaContext;
  void check_replica(int replica, const char* where) const;

  std::vector<Device> devices_;
  CrossDeviceOps cross_device_ops_;
  VariablePlacement placement_;
  int threads_per_replica_;
  std::vector<std::unique_ptr<nn::VariableStore>> stores_;   // [num_replicas], or [1] central
  std::vector<std::unique_ptr<nn::ModelContext>> contexts_;  // [num_replicas]
  std::unique_ptr<ReplicaPool> pool_;
  std::vector<std::vector<Tensor>*> collective_slots_;    // [num_replicas], during a collective
  std::vector<std::vector<Tensor>*> collective_outputs_;  // [num_replicas], their results
};

// The default devices of MirroredStrategy and CentralStorageStrategy: every local GPU, else
// one CPU ({"/cpu:0"}). This build has no GPU backend yet, so it is always {"/cpu:0"}.
std::vector<std::string> local_devices();

// Parses TensorFlow device names ("/cpu:0", "/device:CPU:1"); the parse error for bad ones.
std::vector<Device> parse_devices(const std::vector<std::string>& names);

}  // namespace est::distribute
