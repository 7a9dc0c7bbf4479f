// ContextControl: what distribution strategies and the Estimator's replicas set on a
// ModelContext, kept off its public interface (a model_fn author uses variables, mode, scopes,
// layers and generators; model_context.h). Internal: not installed.
//
// A strategy moves a replica's context to the replica's device, makes it defer its moving
// averages (averaged over replicas, or sent to their owners, by the step), keeps its
// initializer stream in step with the other replicas on a shared store, and hands it the
// replica's CrossReplicaSync while a step runs (Optimizer::apply_gradients and get_variable
// reach the replica through it).
#pragma once

#include <vector>

#include "nn/model_context.h"

namespace est::nn {

// A moving-average update a layer asked for while updates were deferred: `variable` (a handle
// on the store's storage) becomes variable * momentum + value * (1 - momentum).
struct MovingAverageUpdate {
  Tensor variable;
  Tensor value;  // detached
  double momentum = 0;
};

// variable = variable * momentum + value * (1 - momentum), in place, no gradient recorded.
void apply_moving_average(const MovingAverageUpdate& update);

class ContextControl {
 public:
  explicit ContextControl(ModelContext& ctx) : ctx_(&ctx) {}

  // Where the context computes (ModelContext::device()).
  void set_device(Device device) { ctx_->device_ = device; }

  // Moving averages: applied at once by default; deferred, update_moving_average keeps this
  // call's updates until take_moving_average_updates() (begin_call() drops those nobody took).
  void set_defer_moving_averages(bool defer) { ctx_->defer_moving_averages_ = defer; }
  bool defers_moving_averages() const { return ctx_->defer_moving_averages_; }
  std::vector<MovingAverageUpdate> take_moving_average_updates();

  // For contexts that share one store with other contexts building the same model (central
  // storage replicas, each on its own thread): the first time this context meets a variable
  // that another context already created, it still draws (and discards) its initial value, so
  // its initializer stream stays in step and the variables it does create get the values
  // unreplicated training would give them, whichever replica thread got there first.
  void set_shares_store(bool shares) { ctx_->shares_store_ = shares; }

  // The replica of a distribution strategy this context computes for, while a replica step
  // runs (the strategy sets it for the step; null otherwise): apply_gradients with this
  // context sums the gradients over replicas through it, and get_variable lets it replace a
  // new variable's initial value (several workers: the chief's).
  CrossReplicaSync* replica_sync() const { return ctx_->replica_sync_; }
  void set_replica_sync(CrossReplicaSync* sync) { ctx_->replica_sync_ = sync; }

 private:
  ModelContext* ctx_;
};

}  // namespace est::nn
