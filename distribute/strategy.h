// Strategy: how a training step is replicated over local devices, as tf.distribute.Strategy.
//
// Every in-process strategy is the same machinery: one replica per device, each replica on
// its own persistent thread with its own VariableStore and ModelContext (variables mirrored:
// created from the same seed, kept identical because every replica applies the same
// all-reduced gradients). The subclasses only choose the devices and the cross-device ops.
// The custom-training-loop API reads as in TensorFlow:
//   PerReplica losses = strategy.run([&](ReplicaContext& replica) {
//     ModelContext& ctx = replica.model_context();
//     ctx.begin_call();
//     Tensor loss = ... / replica.num_replicas_in_sync();  // scaled by the global batch
//     TrainOp op = optimizer.minimize(loss, ctx);
//     op.run(replica.gradient_transform());  // all-reduce (sum), then the update
//     return loss;
//   }, inputs);
//   double total = strategy.reduce(ReduceOp::kSum, losses).item();
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

// What a step function sees while it runs on one replica's thread.
class ReplicaContext {
 public:
  int replica_id() const { return replica_id_; }
  int num_replicas_in_sync() const;
  Device device() const;
  nn::ModelContext& model_context();
  nn::VariableStore& store();
  // This replica's input (empty when run() was given none).
  const data::Element& input() const { return *input_; }

  // Collectives: every replica must call them, in the same order, with lists of the same
  // shapes. Afterwards `tensors` holds the reduction over all replicas (fresh buffers).
  void all_reduce(ReduceOp op, std::vector<Tensor>& tensors);
  // Sums the gradients over replicas (the loss is already scaled by the global batch).
  void all_reduce_gradients(std::vector<nn::GradAndVar>& grads_and_vars);
  // all_reduce_gradients as a TrainOp transform: `train_op.run(replica.gradient_transform())`.
  // It refers to this context: use it only inside the step function that received it.
  nn::GradientTransform gradient_transform();

 private:
  friend class Strategy;
  ReplicaContext(Strategy& strategy, int replica_id, const data::Element& input)
      : strategy_(&strategy), replica_id_(replica_id), input_(&input) {}
  Strategy* strategy_;
  int replica_id_;
  const data::Element* input_;
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

  // Replica `replica`'s variables and model context (the mirrored copies).
  nn::VariableStore& store(int replica);
  nn::ModelContext& model_context(int replica);

 protected:
  // `devices` must be non-empty and distinct (InvalidArgumentError). `seed` seeds every
  // replica's ModelContext identically, so mirrored variables start equal.
  Strategy(std::vector<Device> devices, CrossDeviceOps cross_device_ops, uint64_t seed);

 private:
  friend class ReplicaContext;
  void check_replica(int replica, const char* where) const;

  std::vector<Device> devices_;
  CrossDeviceOps cross_device_ops_;
  int threads_per_replica_;
  std::vector<std::unique_ptr<nn::VariableStore>> stores_;   // [num_replicas]
  std::vector<std::unique_ptr<nn::ModelContext>> contexts_;  // [num_replicas]
  std::unique_ptr<ReplicaPool> pool_;
  std::vector<std::vector<Tensor>*> collective_slots_;  // [num_replicas], during a collective
};

// Parses TensorFlow device names ("/cpu:0", "/device:CPU:1"); the parse error for bad ones.
std::vector<Device> parse_devices(const std::vector<std::string>& names);

}  // namespace est::distribute
