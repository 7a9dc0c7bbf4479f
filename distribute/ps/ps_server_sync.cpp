// PsServer's synchronous requests (SyncReplicasOptimizer's semantics, distribute/ps/
// sync_replicas.h): the chief's configuration, a worker's push into the accumulator with the
// update applied once per step, the token a worker waits for before its next step, and the
// three in one round trip (kSyncStep).
#include <fmt/format.h>

#include "distribute/ps/ps_server.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/indexed_slices.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";
using Clock = std::chrono::steady_clock;

std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

std::optional<PsServer::SyncStats> PsServer::sync_stats() const {
  std::lock_guard lock(mutex_);
  if (!accumulator_) return std::nullopt;
  SyncReplicasOptions options;
  options.replicas_to_aggregate = accumulator_->replicas_to_aggregate();
  if (tokens_) options = tokens_->options();
  return SyncStats{.options = options,
                   .steps = accumulator_->steps_taken(),
                   .stale_dropped = accumulator_->stale_dropped()};
}

PsReply PsServer::sync_configure(const PsRequest& request, const std::string& client) {
  if (request.tensors.size() != 1)
    throw DataLossError(fmt::format("{}'s synchronous-training settings hold {} tensors, not 1",
                                    client, request.tensors.size()));
  SyncReplicasOptions options = SyncReplicasOptions::from_tensor(request.tensors[0], client);
  // A chief that restarted configures again: a step's partial group is dropped with the old
  // accumulator (its workers' pushes were computed from values the chief may have replaced).
  accumulator_.emplace(options.replicas_to_aggregate, request.global_step);
  if (holds_global_step_) {
    if (tokens_)
      tokens_->restart(options, request.global_step);
    else
      tokens_.emplace(options, request.global_step);
    ops::NoGradGuard no_grad;
    store_.get(kGlobalStep).value.data<int64_t>()[0] = request.global_step;
  }
  sync_configured_by_ = client;
  token_timeout_ = options.token_timeout;
  log::info(
      "{}: SyncReplicas: replicas_to_aggregate={}; total_num_replicas={} (from {}, at step {}{})",
      name(), options.replicas_to_aggregate, options.resolved_total_num_replicas(), client,
      request.global_step,
      holds_global_step_ ? fmt::format("; {} tokens to start", options.resolved_num_tokens()) : "");
  tokens_cv_.notify_all();
  return values({});
}

PsReply PsServer::sync_push(const PsRequest& request, const std::string& client) {
  if (!accumulator_)
    throw FailedPreconditionError(fmt::format(
        "{} pushed gradients synchronously, but the chief did not configure synchronous training "
        "here: give every training task the same ParameterServerOptions::sync_replicas",
        client));
  if (!options_.optimizer)
    throw InternalError("this ps task has no optimizer to apply updates with");
  // A row-sparse gradient (an embedding's rows) stays rows in the accumulator.
  std::vector<NamedTensor> gradients;
  for (const NamedTensor& t : request.tensors) {
    std::optional<nn::Variable> variable = store_.find(t.name);
    if (!variable)
      throw NotFoundError(
          fmt::format("this ps task holds no variable '{}' for {}'s gradient", t.name, client));
    const ops::Shape& shape = t.rows.defined() ? t.rows.dense_shape : t.value.shape();
    if (shape != variable->value.shape())
      throw InvalidArgumentError(fmt::format("{}'s gradient for '{}' has shape {}, the variable {}",
                                             client, t.name, ops::shape_str(shape),
                                             ops::shape_str(variable->value.shape())));
    gradients.push_back(t);
  }
  // Batch norm's statistics: each replica's, as it arrives (TF's update ops are not aggregated).
  apply_moving_averages(request, client);
  if (!accumulator_->apply_grad(request.global_step, gradients)) {
    log::debug("{}: dropped {}'s stale gradients of step {} (the accumulator is at step {})",
               name(), client, request.global_step, accumulator_->step());
    return values({});
  }
  // A group is complete: its mean, applied once with the job's optimizer. The learning rate
  // reads the step being applied; global_step itself advances with the tokens (take_token),
  // once every ps task has applied the step. Pushes held for the next step may complete it too.
  while (accumulator_->ready()) {
    int64_t step = accumulator_->step();
    std::vector<NamedTensor> means = accumulator_->take_grad();
    if (!means.empty()) apply_mean(step, std::move(means));
  }
  tokens_cv_.notify_all();  // sync_step's waits for this step
  return values({});
}

void PsServer::apply_mean(int64_t step, std::vector<NamedTensor> means) {
  std::vector<nn::GradAndVar> grads;
  for (NamedTensor& mean : means)  // rows: the optimizer's sparse update, as TF's on a ps
    grads.push_back({.name = mean.name,
                     .gradient = mean.value,
                     .variable = store_.get(mean.name).value,
                     .sparse_gradient = std::move(mean.rows)});
  ops::NoGradGuard no_grad;
  options_.optimizer->update(store_, std::move(grads), step);  // the tokens advance global_step
  ++updates_;
}

PsReply PsServer::sync_step(const PsRequest& request, const std::string& client,
                            std::unique_lock<std::mutex>& lock) {
  sync_push(request, client);
  int64_t token = -1;
  if (holds_global_step_) {
    token = take_token(request, client, lock).global_step;
  } else {
    // The worker reads this task's values next: once its step is applied here (the token on
    // the task holding global_step says every task has applied it; asking in the same round
    // trip, each task waits for its own part). Bounded a little past the token's wait, so that
    // a missing replica is named by that wait first.
    const std::chrono::milliseconds timeout = token_timeout_ + std::chrono::seconds(5);
    const Clock::time_point deadline = Clock::now() + timeout;
    while (accumulator_->step() <= request.global_step && !chief_done_) {
      throw_if_stopped();
      throw_if_too_few_replicas(request.global_step);
      if (Clock::now() >= deadline)
        throw DeadlineExceededError(fmt::format(
            "{} waited {} s for {} to apply synchronous step {}: {} of replicas_to_aggregate = {} "
            "replicas had pushed it here{}. A training task died or stalled: restart it, or raise "
            "SyncReplicasOptions::token_timeout",
            client, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), name(),
            request.global_step, accumulator_->count(), accumulator_->replicas_to_aggregate(),
            lost_tasks()));
      tokens_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  PsReply reply = values(request.names);
  reply.token = token;
  return reply;
}

PsReply PsServer::take_token(const PsRequest& request, const std::string& client,
                             std::unique_lock<std::mutex>& lock) {
  if (!tokens_)
    throw FailedPreconditionError(fmt::format(
        "{} asked for a synchronous-training token, but {}", client,
        holds_global_step_ ? "the chief did not configure synchronous training here"
                           : "this task does not hold global_step (ps 0 keeps the tokens)"));
  if (tokens_->arrive(request.global_step, client)) {
    ops::NoGradGuard no_grad;
    store_.get(kGlobalStep).value.data<int64_t>()[0] = tokens_->global_step();
    tokens_cv_.notify_all();
  }
  const std::chrono::milliseconds timeout = tokens_->options().token_timeout;
  const Clock::time_point deadline = Clock::now() + timeout;
  // In the order the waiters came (SyncTokenQueue::wait; a chief that configures again
  // restarts the queue with its waiters).
  struct Turn {  // whichever way this returns or throws: the next waiter's turn
    PsServer* server;
    uint64_t waiter;
    ~Turn() {
      server->tokens_->leave(waiter);
      server->tokens_cv_.notify_all();
    }
  } turn{this, tokens_->wait()};
  for (;;) {
    PsReply reply;
    if (std::optional<int64_t> token = tokens_->take(turn.waiter)) {
      reply.global_step = *token;
      return reply;
    }
    if (chief_done_) {  // the job is ending: no step will complete any more
      reply.global_step = tokens_->global_step();
      return reply;
    }
    throw_if_stopped();
    throw_if_too_few_replicas(tokens_->global_step());
    if (Clock::now() >= deadline) {
      const std::vector<std::string>& arrived = tokens_->arrived();
      std::string who = arrived.empty() ? "" : " (" + join_names(arrived) + ")";
      std::vector<std::string> done(done_.begin(), done_.end());
      who += lost_tasks();
      if (!done.empty()) who += fmt::format("; {} finished training", join_names(done));
      throw DeadlineExceededError(fmt::format(
          "{} waited {} s for the token of synchronous step {}: {} of replicas_to_aggregate = {} "
          "replicas had pushed that step's gradients to every ps task{}. A training task died or "
          "stalled: restart it (it rejoins the step), or raise SyncReplicasOptions::token_timeout",
          client, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
          tokens_->global_step(), arrived.size(), tokens_->options().replicas_to_aggregate, who));
    }
    tokens_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void PsServer::throw_if_stopped() const {
  if (end_ && !end_->ok()) throw_error(end_->code, end_->message);
  if (stopping_) throw CancelledError("the ps task is stopping");
}

void PsServer::throw_if_too_few_replicas(int64_t step) const {
  if (lost_.empty() || !accumulator_) return;
  const int replicas = accumulator_->replicas_to_aggregate();
  const int remaining = options_.num_workers - static_cast<int>(lost_.size());
  if (remaining >= replicas) return;
  throw AbortedError(fmt::format(
      "synchronous step {} cannot complete: the connection from {} ended before it was done, "
      "leaving {} of the job's {} training tasks for replicas_to_aggregate = {} (no backup "
      "replica takes its place). Restart the job (the chief resumes from the latest checkpoint), "
      "or train with backup replicas (SyncReplicasOptions::total_num_replicas above "
      "replicas_to_aggregate)",
      step, join_names(std::vector<std::string>(lost_.begin(), lost_.end())),
      std::max(remaining, 0), options_.num_workers, replicas));
}

std::string PsServer::lost_tasks() const {
  if (lost_.empty()) return "";
  return fmt::format("; the connection from {} ended before it was done",
                     join_names(std::vector<std::string>(lost_.begin(), lost_.end())));
}

}  // namespace est::distribute
