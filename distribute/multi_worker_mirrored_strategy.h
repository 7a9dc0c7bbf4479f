// MultiWorkerMirroredStrategy: synchronous training across worker processes, each with its
// local replicas, as tf.distribute.MultiWorkerMirroredStrategy.
//
// The cluster comes from TF_CONFIG (its chief and workers train; ps and evaluator tasks do not
// take part). Constructing the strategy brings up this task's part of the job
// (distribute/cluster/cluster_runtime.h: the coordination service on the chief, or worker 0 without
// a chief; the rendezvous of every task; the data-plane ring) and logs TensorFlow's lines.
// num_replicas_in_sync = workers x local replicas; each step reduces over the local replicas
// and then over the workers with the ring (CollectiveAllReduce), or with NCCL on GPU workers
// (communication NCCL, or AUTO on GPUs: distribute/collectives/nccl_collective_all_reduce.h);
// before the first update every variable is made equal to the chief's, so the workers need not
// share a seed. Processes on one host divide its cores (cores / local tasks / local replicas
// threads per replica). With a TF_CONFIG of one task, or none, it trains locally like
// MirroredStrategy.
//
// A worker that fails tells the others (report_error, which the Estimator calls), and every
// other task stops with that error; a worker that dies or hangs is named on every other task
// within seconds (heartbeats). The destructor ends the job in order (every worker waits for the
// others) unless an error was seen, in which case it only says that this task is leaving.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distribute/cluster/tf_config.h"
#include "distribute/collectives/collective_all_reduce.h"
#include "distribute/net/tls_options.h"
#include "distribute/strategy.h"

namespace est::distribute {

class ClusterRuntime;

// est's settings of the runtime (not TensorFlow's): where the token and TLS come from, the
// time limits, this worker's devices and the seed.
struct MultiWorkerOptions {
  std::optional<std::string> token;  // unset: job_token_from_environment()
  std::optional<TlsOptions> tls;     // unset: TlsOptions::from_environment()
  // How long every task waits for the others to join (TensorFlow's
  // RunConfig.session_creation_timeout_secs, 7200 by default).
  std::chrono::milliseconds session_creation_timeout{std::chrono::hours(2)};
  std::chrono::milliseconds heartbeat_interval{1000};
  // A task silent for this long is declared dead on every other task.
  std::chrono::milliseconds heartbeat_timeout{5000};
  std::vector<std::string> devices = local_devices();
  uint64_t seed = 0;
};

class MultiWorkerMirroredStrategy : public Strategy {
 public:
  // The cluster and task from the TF_CONFIG environment variable.
  explicit MultiWorkerMirroredStrategy(CommunicationOptions communication = {},
                                       MultiWorkerOptions options = {});
  MultiWorkerMirroredStrategy(const TfConfig& config, CommunicationOptions communication = {},
                              MultiWorkerOptions options = {});
  // `std::make_shared` of the first constructor: what RunConfig{.train_distribute = ...} takes.
  static std::shared_ptr<MultiWorkerMirroredStrategy> from_env(
      CommunicationOptions communication = {}, MultiWorkerOptions options = {});
  ~MultiWorkerMirroredStrategy() override;

  std::string_view name() const override { return "MultiWorkerMirroredStrategy"; }
  std::string description() const override;
  const TfConfig& tf_config() const { return config_; }
  const CommunicationOptions& communication_options() const { return communication_; }
  // Null when training locally (one task).
  ClusterRuntime* runtime() const { return runtime_.get(); }

  void report_error(const std::exception& error) noexcept override;
  // At the coordination service (a barrier of its own for each call, numbered in call order),
  // waiting at most CommunicationOptions::timeout_seconds, else
  // MultiWorkerOptions::session_creation_timeout (the time a task waits for the others to join).
  // DeadlineExceededError naming `what` and the missing workers when that runs out; the job's
  // error, prefixed with `what`, when a worker dies or fails meanwhile.
  void barrier(std::string_view what) override;
  // The orderly end of the job: waits until every worker gets here (the destructor calls it
  // when no error was seen). Idempotent.
  void shutdown();

 private:
  struct Setup;
  MultiWorkerMirroredStrategy(Setup setup);

  TfConfig config_;
  CommunicationOptions communication_;
  std::shared_ptr<ClusterRuntime> runtime_;
  std::chrono::milliseconds barrier_timeout_;
  int64_t barriers_ = 0;  // barrier() calls so far
  bool failed_ = false;
};

}  // namespace est::distribute
