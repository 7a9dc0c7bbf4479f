// VariableHome: where a strategy's variables live, seen from a replica's step: the part of a
// strategy that a parameter-server task or the replicas' own stores provide, apart from what a
// step does with the gradients (GradientPath, gradient_path.h).
//
// A strategy's replicas read and write their VariableStore; the home says whether that store
// is the variables themselves (replicas_home(): mirrored copies, or central storage's shared
// one, for MirroredStrategy, CentralStorage, MultiWorkerMirrored and OneDevice) or a cache of
// variables owned elsewhere (a parameter server: its tasks own them, a worker pulls fresh values
// before it reads, the chief sends the initial values and reads everything back before a
// checkpoint). ReplicaContext hands the home a new variable's initial value and each read of a
// variable; Strategy::run calls before_step before each step function; the Estimator's
// TrainingSession calls variables_ready, before_checkpoint and restore_state.
//
// Threads: the calls with a ReplicaContext are made on that replica's thread inside
// Strategy::run, concurrently for the local replicas (a home keeps per-replica state indexed by
// replica.replica_id() or guarded); the others on the training loop's thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/variable_store.h"
#include "ops/tensor.h"

namespace est::distribute {

class ReplicaContext;

class VariableHome {
 public:
  virtual ~VariableHome() = default;

  // Before each step function Strategy::run runs on `replica` (so before the forward pass
  // reads the variables of replica.store()). A training step of the Estimator is two runs (the
  // model_fn, then the train op), so this may be called twice between two updates: a home that
  // refreshes the store (a parameter server's pull of fresh values) does so only when its copy
  // is stale (an update was pushed since its last pull). The replicas' own stores: nothing
  // (the gradient path updates them in place).
  virtual void before_step(ReplicaContext& /*replica*/) {}

  // A training model_fn just created variable `name` in replica.store() with `value` (its
  // initializer's value): overwrite `value` in place with the value every replica must start
  // from. Every replica of the step creates the same variables in the same order. The
  // replicas' own stores with several workers: the chief's value
  // (ReplicaContext::broadcast_initial_value), else nothing. Parameter server: the owner's value
  // (the chief initialized or restored it there).
  virtual void initialize_variable(ReplicaContext& replica, const std::string& name,
                                   Tensor& value) = 0;

  // A model_fn is about to read variable `name` of replica.store() (`value`, the store's
  // tensor): whole (`rows` null), or only the rows `*rows` names along axis 0 (an embedding
  // lookup through ModelContext::get_variable_rows: integer ids, negative ones skipped).
  // The replicas' own stores: nothing (the store is the variables). Parameter server: brings
  // what will be read up to date in `value` (the rows alone for a lookup, pulled from their
  // owners).
  virtual void read_variable(ReplicaContext& /*replica*/, const std::string& /*name*/,
                             Tensor& /*value*/, const Tensor* /*rows*/) {}

  // The chief, after the first training model_fn call on replica 0's `store`, once the restore,
  // the warm start and Scaffold.init_fn have set the variables' values: a home elsewhere sends
  // those initial values to their owners (parameter servers: the other workers wait for them,
  // as TF's workers wait until the chief's session is ready). It may also do this at its first
  // update or checkpoint (the custom training loop does not call this). The replicas' own
  // stores: nothing (initialize_variable broadcast the values).
  virtual void variables_ready(nn::VariableStore& /*store*/) {}

  // The chief, before a checkpoint is written from replica 0's `store`: a home elsewhere
  // brings the variables' current values and optimizer state into the store (parameter
  // servers: read back from the owners). The replicas' own stores: nothing (the store is the
  // state).
  virtual void before_checkpoint(nn::VariableStore& /*store*/) {}
  // Whether restore_state wants the values of a restored checkpoint that no variable took.
  virtual bool wants_restored_state() const { return false; }
  // After the first model_fn call of a restored (or warm-started) job: the checkpoint's values
  // that no variable of the model took (optimizer slots, beta1_power), for a home whose
  // optimizer state lives elsewhere (parameter servers: sent to the owners). The replicas' own
  // stores: nothing (the optimizer takes them from the store when it creates its slots).
  virtual void restore_state(const std::vector<std::pair<std::string, Tensor>>& /*values*/) {}
};

// The variables in the replicas' own stores (as the strategy's VariablePlacement makes them):
// across workers each new variable takes the chief's initial value; nothing else to do.
// Stateless: strategies may share it.
std::shared_ptr<VariableHome> replicas_home();

}  // namespace est::distribute
