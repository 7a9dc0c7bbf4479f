// PsSyncStep: a worker's side of synchronous parameter-server training (SyncReplicasOptimizer's
// semantics, distribute/ps/sync_replicas.h), used by PsGradientPath when
// ParameterServerOptions::sync_replicas is set.
//
// As TF's replicas do, a worker keeps its local step (sync_rep_local_step): the global step when
// it starts, then the token of each step. A step pushes the gradients, tagged with the local
// step, to every ps task (each accumulates them, or drops them as stale, and applies the step's
// mean when its group is complete); the task holding global_step counts the replica as through
// and holds its reply until a token is there (TF's dequeue from sync_token_q, at the end of the
// train op), whose value becomes the local step; every other task holds its reply until it has
// applied the step; each reply then carries the task's fresh values, which the next step reads.
// One round trip per step (kSyncStep): the waits happen on the ps tasks, before they reply.
#pragma once

#include <cstdint>
#include <set>
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
  // the fresh values and global step into `store`, but those of `not_pulled` (tables read by
  // rows only: PsVariables::pull_rows).
  void step(nn::VariableStore& store, const std::vector<nn::GradAndVar>& grads,
            const std::vector<PsMovingAverage>& moving_averages = {},
            const std::set<std::string>& not_pulled = {});

  int64_t local_step() const { return local_step_; }

 private:
  PsVariables* variables_;
  SyncReplicasOptions options_;
  std::string task_;
  bool is_chief_;
  int64_t local_step_ = 0;
};

}  // namespace est::distribute
