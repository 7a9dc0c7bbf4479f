// PsSyncStep: a worker's side of synchronous parameter-server training (SyncReplicasOptimizer's
// semantics, distribute/ps/sync_replicas.h), used by PsGradientPath when
// ParameterServerOptions::sync_replicas is set.
//
// As TF's replicas do, a worker keeps its local step (sync_rep_local_step): the global step when
// it starts, then the token of each step. A step pushes the gradients, tagged with the local
// step, to every ps task (each accumulates them, or drops them as stale, and applies the step's
// mean when its group is complete), then tells the task holding global_step that it is through
// and waits there for a token (TF's dequeue from sync_token_q, at the end of the train op),
// whose value becomes the local step; the next step reads fresh values. Three round trips per
// step: push to every ps task, token from ps 0, pull from every ps task.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distribute/ps/ps_variables.h"
#include "distribute/ps/sync_replicas.h"
#include "nn/optimizer.h"
#include "nn/variable_store.h"

namespace est::distribute {

class PsSyncStep {
 public:
  // `variables` must outlive this object. `task`: this task's name, for the ps tasks' messages.
  PsSyncStep(PsVariables& variables, SyncReplicasOptions options, std::string task, bool is_chief);

  // Once global_step is placed (and, on the chief, initialized on ps 0), before any other
  // variable is: the chief configures synchronous training on every ps task, starting at the
  // global step of `store`; another worker takes the owner's global step as its local step,
  // waiting (at most `wait_for_chief`) until the chief has initialized it.
  void start(nn::VariableStore& store, std::chrono::milliseconds wait_for_chief);
  // One step: push `grads` (scaled and clipped; those of placed variables) and
  // `moving_averages` (applied as they arrive, not aggregated), wait for the token, then write
  // the fresh values and global step into `store`.
  void step(nn::VariableStore& store, const std::vector<nn::GradAndVar>& grads,
            const std::vector<PsMovingAverage>& moving_averages = {});

  int64_t local_step() const { return local_step_; }

 private:
  PsVariables* variables_;
  SyncReplicasOptions options_;
  std::string task_;
  bool is_chief_;
  int64_t local_step_ = 0;
};

}  // namespace est::distribute
