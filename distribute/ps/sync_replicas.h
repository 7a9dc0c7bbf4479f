// Synchronous training on parameter servers with TF1's SyncReplicasOptimizer semantics
// (tensorflow/python/training/sync_replicas_optimizer.py, and the ConditionalAccumulator of
// tensorflow/python/ops/data_flow_ops.py it builds on): the options a worker asks for, and the
// two pieces of state a ps task keeps for them, here as plain objects (no sockets, no locks:
// the PsServer holds them under its mutex) so that they can be tested on their own.
//
//   GradientAccumulator (every ps task, one for the variables it holds): a worker's gradients
//     arrive tagged with the step it computed them at (its local step); a gradient older than
//     the accumulator's step is stale and dropped; once `replicas_to_aggregate` fresh pushes
//     have arrived, each variable's mean over the gradients it received is taken (then applied
//     once with the job's optimizer, on the ps task) and the accumulator's step advances by one.
//     A push of a later step than the accumulator's (its worker took a token of a step that ps 0
//     completed while this task had yet to receive that step's pushes) is held until the
//     accumulator reaches its step, and counts there. TF's ConditionalAccumulator counts it for
//     its current step instead, which is sound in TF because the chief takes every
//     accumulator's group before it releases a step's tokens; here ps 0 releases them alone,
//     counting a push for its own step only, so every accumulator must count it for that step
//     too, or a step ps 0 completed can lack a push on another task that no replica will send
//     again (the last steps, once a replica has finished, waited forever).
//     A row-sparse gradient (an embedding's rows) stays row-sparse, as in TF's
//     SparseConditionalAccumulator (tensorflow/core/kernels/sparse_conditional_accumulator.h):
//     each row is averaged over the pushes that carried it ("average element-wise"), not over
//     all of them, and the mean is applied with the optimizer's sparse update, so that rows no
//     worker read keep their values and slots (momentum does not decay them).
//   SyncTokenQueue (the task that holds global_step, ps 0): a worker that has pushed a step's
//     gradients to every ps task arrives here with that step and takes a token before its next
//     step (TF's sync_token_q). When `replicas_to_aggregate` workers have arrived with the
//     current step, every ps task has applied that step (each of those pushes was either one of
//     its group, or stale because its group was already applied), so global_step advances by one
//     and max(total_num_replicas, replicas_to_aggregate) tokens holding the new step are
//     released. `num_tokens` tokens are there from the start (TF's make_session_run_hook(
//     is_chief, num_tokens=-1): replicas_to_aggregate of them), so that with fewer workers than
//     replicas_to_aggregate the first step can fill up.
//
// As in TensorFlow, what is counted is pushes, not distinct workers: a worker that holds a spare
// token may supply two gradients of one step, and another none. With the default num_tokens each
// worker's first step is followed at once by a second, computed before the first update landed,
// which TensorFlow usually drops as stale; num_tokens = 0 makes the workers step in lock-step
// from the start (replicas_to_aggregate = total_num_replicas = workers then gives exactly the
// update of synchronous all-reduce over the same global batch).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "distribute/ps/ps_wire.h"
#include "distribute/ps/sync_replicas_options.h"

namespace est::distribute {

class GradientAccumulator {
 public:
  // Starts at `global_step` (TF's set_global_step from the chief's init op).
  GradientAccumulator(int replicas_to_aggregate, int64_t global_step);

  // One worker's gradients (variable or part name -> gradient: dense in `value`, or row-sparse
  // in `rows`; a SparseTensor value is densified), computed at `local_step`. Returns false,
  // changing nothing, when they are stale (local_step < step()); an empty push counts as one
  // replica's arrival; a push of a later step (local_step > step()) counts once step() reaches
  // it (take_grad moves it in). A variable that gets a dense gradient from one push and rows from
  // another (workers whose model_fns differ) is summed densely, over every push it received.
  bool apply_grad(int64_t local_step, const std::vector<NamedTensor>& gradients);
  // Whether replicas_to_aggregate fresh pushes have arrived.
  bool ready() const { return count_ >= replicas_to_aggregate_; }
  // Each variable's mean over the gradients it received since the last take (variables that
  // received none are left out): dense in `value`, or each row's mean over the pushes that
  // carried it in `rows` (distinct rows, in the order they first arrived); the accumulator
  // empties, step() advances by one, and the pushes held for the new step count (it may be
  // ready() again). InvalidArgumentError unless ready().
  std::vector<NamedTensor> take_grad();

  int64_t step() const { return step_; }
  int count() const { return count_; }  // fresh pushes since the last take
  int replicas_to_aggregate() const { return replicas_to_aggregate_; }
  uint64_t stale_dropped() const { return stale_dropped_; }
  uint64_t steps_taken() const { return steps_taken_; }

 private:
  struct Sum {
    ops::Tensor total;                       // the dense sum; undefined while only rows came
    std::vector<ops::IndexedSlices> pushes;  // row-sparse pushes, repeats summed, in order
    int count = 0;                           // pushes that carried this variable
  };
  static NamedTensor mean_of(const std::string& name, Sum& sum);
  void add(std::vector<NamedTensor> pushed);  // a checked push of step(), into the sums
  int replicas_to_aggregate_;
  int64_t step_;
  int count_ = 0;
  std::map<std::string, Sum> sums_;
  std::map<std::string, ops::Shape> shapes_;  // each name's dense shape, from its first push
  // Checked pushes of later steps than step_, by step, each step's in the order they came.
  std::multimap<int64_t, std::vector<NamedTensor>> ahead_;
  uint64_t stale_dropped_ = 0;
  uint64_t steps_taken_ = 0;
};

class SyncTokenQueue {
 public:
  SyncTokenQueue(const SyncReplicasOptions& options, int64_t global_step);
  // A chief that configures again: a fresh queue at `global_step` (its tokens, no arrivals),
  // keeping the waiters in their order.
  void restart(const SyncReplicasOptions& options, int64_t global_step);

  // A worker (`task`) pushed the gradients of `local_step` to every ps task. Returns true when
  // this completed the current step: global_step() advanced and the step's tokens are queued.
  bool arrive(int64_t local_step, const std::string& task);
  // The oldest token (the global step it was released at), if one is queued.
  std::optional<int64_t> take();
  // Waiters take tokens in the order they came, as TF's sync_token_q (a FIFO queue) serves its
  // blocked dequeues: a replica that completed a step and came back for the next one before a
  // waiter of the last step woke up must not take that waiter's token. wait() queues a waiter;
  // take(waiter) gives it the oldest token once every earlier waiter has left; leave(waiter)
  // takes it out of the queue (with or without a token).
  uint64_t wait();
  std::optional<int64_t> take(uint64_t waiter);
  void leave(uint64_t waiter);

  int64_t global_step() const { return global_step_; }
  // The tasks that arrived with the current step so far (for messages).
  const std::vector<std::string>& arrived() const { return arrived_; }
  const SyncReplicasOptions& options() const { return options_; }

 private:
  SyncReplicasOptions options_;
  int64_t global_step_;
  std::vector<std::string> arrived_;
  std::deque<int64_t> tokens_;
  std::deque<uint64_t> waiters_;
  uint64_t next_waiter_ = 0;
};

}  // namespace est::distribute
