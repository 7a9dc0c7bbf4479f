// PsServer: what a `ps` task runs instead of training (TF1's `server.join()` on a ps task,
// tensorflow_estimator's training.py): it holds the variables placed on it (distribute/ps/
// ps_placement.h), with their optimizer slots beside them, and serves the workers' requests
// (distribute/ps/ps_wire.h) on its TF_CONFIG address over TCP, each connection carrying the job
// token.
//
// Updates are asynchronous as in TF1's between-graph training: each push is applied when it
// arrives, with the job's optimizer, one request at a time (TF's use_locking), and the reply
// carries the fresh values the worker asked for. Gradients a worker sent ahead during its
// backward pass (kStage) wait on their connection for its push and are applied with it. An
// embedding lookup's rows are gathered here (kPullRows) and a row-sparse gradient is applied
// with the optimizer's sparse update. The task that holds `global_step` (ps 0) counts the
// updates; on the others the learning rate reads the step the pushing worker last saw. Unlike
// TF's ps, which joins forever (tensorflow#25858), join() returns when the job ends: every
// training task has said it is done, or the chief has and no other training task is still
// connected (a worker that died does not keep the job alive; one still stepping does); a job
// that failed makes join() throw that error: a task sent it, or the chief's connection ended
// before it was done (nothing saves the job's steps any more), or every training task's did
// (nothing steps any more). Once failed, every request is answered with the job's error.
//
// Synchronous training (SyncReplicasOptimizer's semantics, distribute/ps/sync_replicas.h) is
// switched on by the chief's kSyncConfigure: pushes then go into a GradientAccumulator and
// each step's mean is applied once, here, with the job's optimizer; the task holding
// global_step keeps the token queue, and a worker's kTakeToken waits (at most the configured
// token_timeout, with an error naming the step and the tasks missing) until the step is done
// everywhere. Once the chief is done, tokens are handed out at once, so that a worker waiting
// for one ends its training instead of waiting for a step that will not come.
//
// A push may also carry moving averages (batch norm's statistics), applied to the variables
// held here as they arrive (after the gradients of an asynchronous push; synchronous ones are
// not aggregated), as TF colocates assign_moving_average with its variable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distribute/net/coordination_state.h"
#include "distribute/ps/ps_wire.h"
#include "distribute/ps/sync_replicas.h"
#include "nn/optimizer.h"
#include "nn/variable_store.h"

namespace est::distribute {

struct PsServerOptions {
  std::string address;  // "host:port" to listen on; port 0 picks a free one (tests)
  std::string token;    // the job token
  int task_index = 0;   // this ps task
  int num_workers = 1;  // training tasks (chief + workers): the job ends when each is done
  // The chief's task name ("chief 0"; "worker 0" in a cluster without a chief): its connection
  // ending before it said it was done fails the job. Empty: no task is the chief here.
  std::string chief;
  // The job's optimizer (clipping, if any, happens on the workers). May be given later
  // (set_optimizer) but before the first push.
  std::optional<nn::optim::Optimizer> optimizer;
  // Processes sharing this host's cores (the job's tasks there, this one included): the
  // serving threads' kernels (the optimizer's updates) take ops::threads_for_local_processes of
  // it, as a training task's replicas do, so that a ps task beside its workers does not run
  // a team of every core against them (a team waits for its slowest thread, and a worker on
  // that core waits for it). 0: the job's tasks on this host as TF_CONFIG in the environment
  // lists them (distribute/cluster's num_local_tasks), 1 without one.
  int local_processes = 0;
};

class PsServer {
 public:
  // Listens at once (UnavailableError naming the address when it cannot) and serves on its
  // own threads.
  explicit PsServer(PsServerOptions options);
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // "host:port" with the port actually bound.
  std::string address() const;
  void set_optimizer(nn::optim::Optimizer optimizer);

  // Waits until the job ends (see above), at most `timeout` (DeadlineExceededError), then stops
  // serving. Throws the job's error when a task reported one.
  void join(std::chrono::milliseconds timeout = std::chrono::hours(24 * 365));
  // Stops serving now (the destructor does too).
  void stop();

  // The names this task holds (variables, parts, slots), sorted: for tests and logs. The step
  // counter that tasks other than ps 0 keep for the learning rate is not listed.
  std::vector<std::string> names() const;
  uint64_t updates_applied() const { return updates_; }
  // The intra-op threads each serving thread's kernels use (ops::set_num_threads).
  int serving_threads() const { return serving_threads_; }
  // Synchronous training's counts (unset while asynchronous).
  struct SyncStats {
    SyncReplicasOptions options;
    uint64_t steps = 0;          // aggregated updates applied here
    uint64_t stale_dropped = 0;  // pushes dropped as stale
  };
  std::optional<SyncStats> sync_stats() const;

 private:
  void accept_loop();
  void serve(std::shared_ptr<Link> link, std::string client);
  // The reply to `request`; a kPull or kPushPull reply (the variables' values themselves) is
  // given to `reply_now` under mutex_ (which encodes it before the lock is released) and an
  // empty reply returned instead.
  PsReply handle(const PsRequest& request, const std::string& client,
                 const std::function<void(const PsReply&)>& reply_now);
  // Under mutex_; `shared`: the tensors are the variables themselves, to encode before the lock
  // is released (else copies).
  PsReply values(const std::vector<std::string>& names, bool shared = false) const;
  // kPullRows: the rows `ids` names of each variable (under mutex_).
  PsReply rows(const std::vector<NamedTensor>& ids, const std::string& client) const;
  // Synchronous training (ps_server_sync.cpp), under mutex_ (`lock` holds it).
  PsReply sync_configure(const PsRequest& request, const std::string& client);
  PsReply sync_push(const PsRequest& request, const std::string& client);
  // A complete group's means (GradientAccumulator::take_grad), applied at `step`.
  void apply_mean(int64_t step, std::vector<NamedTensor> means);
  // The request's moving averages, applied (under mutex_); NotFoundError for a variable not
  // held here.
  void apply_moving_averages(const PsRequest& request, const std::string& client);
  PsReply take_token(const PsRequest& request, const std::string& client,
                     std::unique_lock<std::mutex>& lock);
  // In a synchronous wait (take_token, sync_step): the job's error if it failed, a
  // CancelledError if this task is stopping.
  void throw_if_stopped() const;
  // In a synchronous wait: an AbortedError naming the tasks whose connection ended before they
  // were done when fewer training tasks than replicas_to_aggregate remain (the step `step`
  // cannot complete; waiting for the token's timeout would only delay the error).
  void throw_if_too_few_replicas(int64_t step) const;
  // "; the connection from worker 0 ended before it was done" for the training tasks whose
  // connection ended early, or "": what a synchronous wait's timeout names.
  std::string lost_tasks() const;
  // kSyncStep: sync_push, then take_token here or (elsewhere) a wait until this task's
  // accumulator has passed the request's step, then the values of the request's names.
  PsReply sync_step(const PsRequest& request, const std::string& client,
                    std::unique_lock<std::mutex>& lock);
  void end(JobStatus status);
  // Ends the job (ok) when the rule above says it is over.
  void check_end();
  // `client`'s connection ended before it was done: fails the job (error) when it was the
  // chief's last connection, or the last connection of a training task not done.
  void check_lost(const std::string& client);
  std::string name() const { return "ps " + std::to_string(options_.task_index); }

  PsServerOptions options_;
  std::string host_;
  int port_ = 0;
  int serving_threads_ = 1;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> updates_{0};
  std::thread acceptor_;
  std::mutex threads_mutex_;
  std::vector<std::thread> connections_;

  mutable std::mutex mutex_;  // the store, the optimizer and the job's state
  std::condition_variable ended_cv_;
  nn::VariableStore store_;
  bool holds_global_step_ = false;
  std::set<std::string> done_;            // training tasks that said they are done
  std::multiset<std::string> connected_;  // the callers of the open connections
  bool chief_done_ = false;
  std::optional<JobStatus> end_;  // set once: ok (ended) or the job's error
  std::set<std::string> lost_;    // training tasks whose connection ended before they were done

  // Synchronous training, once the chief configured it: every task accumulates, the task that
  // holds global_step keeps the tokens.
  std::optional<GradientAccumulator> accumulator_;
  std::optional<SyncTokenQueue> tokens_;
  std::string sync_configured_by_;
  std::chrono::milliseconds token_timeout_{};
  std::condition_variable tokens_cv_;  // a step completed or applied, or the job changed
};

}  // namespace est::distribute
