// ParameterServerStrategy: TF1's between-graph training with parameter servers, as the
// Estimator-era tf.distribute.experimental.ParameterServerStrategy (tensorflow/python/
// distribute/parameter_server_strategy.py) and replica_device_setter ran it.
//
// The cluster comes from TF_CONFIG: `ps` tasks hold the variables (placed in creation order,
// round-robin or greedily by size, optionally partitioned along axis 0: ps_placement.h) and
// apply the updates; the chief and the workers train, each on its own (asynchronously), each
// step pushing its gradients to the owners and pulling fresh values in one round trip per ps
// task (ps_gradient_path.h); or, with ParameterServerOptions::sync_replicas, synchronously as
// TF1's SyncReplicasOptimizer trained (sync_replicas.h: the owners average replicas_to_aggregate
// gradients of one step, drop stale ones, apply the mean once; workers wait for a token). The chief
// (or worker 0 without one) initializes the variables on the ps tasks, or restores them from the
// latest checkpoint, and writes the checkpoints by reading them back: the same files every strategy
// writes, so a job restarts under another strategy from them and the other way round. A `ps` task
// runs train_and_evaluate's ps role (estimator/ps_task.h); on it, and on the evaluator, this
// strategy only computes locally.
//
// The constructor only records the cluster (as TensorFlow's does): a training task connects to
// the ps tasks when training starts, retrying until session_creation_timeout, so that the tasks
// of a job may come up in any order, and reads the job token then. Every connection carries the
// job token. A ps task that dies, or stops answering its heartbeat (ps_heartbeat.h), fails every
// worker's next step with an error naming it, and each failing worker tells the ps tasks it can
// reach, which then exit with that error; a worker that dies does not stop the others, but the
// chief does (it writes the checkpoints): the ps tasks then exit with an error naming it, which
// every other worker's next step reports. When the chief is done and the other workers are done
// or gone, the ps tasks exit (ps_server.h).
//
// Without ps tasks in TF_CONFIG (or without TF_CONFIG) it trains in this process with the
// variables on the host, as TF's ParameterServerStrategy without a cluster does
// (CentralStorageStrategy's placement).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "distribute/cluster/tf_config.h"
#include "distribute/ps/ps_placement.h"
#include "distribute/ps/sync_replicas_options.h"
#include "distribute/strategy.h"

namespace est::distribute {

class PsClient;
class PsVariables;

struct ParameterServerOptions {
  std::optional<std::string> token;  // unset: job_token_from_environment()
  PsLoadBalancing load_balancing = PsLoadBalancing::kRoundRobin;
  Partitioner partitioner;  // empty: no variable is partitioned
  // How long a worker waits for the ps tasks to accept and for the chief to initialize the
  // variables (TensorFlow's session_creation_timeout_secs, 7200 by default).
  std::chrono::milliseconds session_creation_timeout{std::chrono::hours(2)};
  // How long a ps task may leave its heartbeat unanswered (stopped, hung) before every worker's
  // wait fails naming it.
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(3)};
  // A gradient of at least this many bytes goes to its ps task as soon as the backward pass
  // completes it, ahead of the step's request (ps_gradient_path.h); 0: every gradient with the
  // request, after the backward pass.
  size_t push_ahead_bytes = size_t{64} << 10;
  // Synchronous training with SyncReplicasOptimizer's semantics (distribute/ps/
  // sync_replicas.h: replicas_to_aggregate, total_num_replicas, num_tokens); unset:
  // asynchronous, TF1's default. Every training task of the job must give the same.
  std::optional<SyncReplicasOptions> sync_replicas;
  std::string device = "/cpu:0";  // this worker's device (one replica)
  uint64_t seed = 0;
};

class ParameterServerStrategy : public Strategy {
 public:
  // The cluster and task from the TF_CONFIG environment variable.
  explicit ParameterServerStrategy(ParameterServerOptions options = {});
  ParameterServerStrategy(const TfConfig& config, ParameterServerOptions options = {});
  static std::shared_ptr<ParameterServerStrategy> from_env(ParameterServerOptions options = {});
  // A training task tells the ps tasks it is done (the chief: the job ends once the others are
  // done or gone), unless an error was reported.
  ~ParameterServerStrategy() override;

  std::string_view name() const override { return "ParameterServerStrategy"; }
  std::string description() const override;
  const TfConfig& tf_config() const { return config_; }
  // Whether this task trains against ps tasks (false: local, a ps task, the evaluator).
  bool has_parameter_servers() const { return variables_ != nullptr; }
  int num_ps() const { return placement_ ? placement_->num_ps() : 0; }
  // Where each variable created so far lives (null without ps tasks).
  const PsPlacement* ps_placement() const { return placement_.get(); }
  // Bytes this task sent to and received from the ps tasks (benchmarks).
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  // The connections to the ps tasks, with their counts of round trips and frames (null without
  // ps tasks).
  const PsClient* ps_client() const { return client_.get(); }

  void report_error(const std::exception& error) noexcept override;
  // One input pipeline per training task, this task's its id in the cluster (the chief 0,
  // worker i at i + 1), as TF's ParameterServerStrategy gives input_fn.
  int64_t num_input_pipelines() const override;
  int64_t input_pipeline_id() const override;
  bool trains_with_other_tasks() const override { return has_parameter_servers(); }

 private:
  struct Setup;
  explicit ParameterServerStrategy(Setup setup);

  TfConfig config_;
  std::string task_name_;
  int64_t num_input_pipelines_ = 1;
  int64_t input_pipeline_id_ = 0;
  std::unique_ptr<PsPlacement> placement_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<PsVariables> variables_;
  bool failed_ = false;
};

}  // namespace est::distribute
