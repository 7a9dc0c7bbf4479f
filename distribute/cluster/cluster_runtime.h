// ClusterRuntime: one task's part in a multi-worker job: the coordination service (on the
// leader), the connection to it, the data plane and the ring collectives, brought up together
// and taken down in order.
//
// The training tasks of a TF_CONFIG cluster (chief and workers; ps and evaluator tasks take no
// part in collectives) are ranked as tensorflow's multi_worker_util.id_in_cluster ranks them:
// the chief 0, worker i at i + 1 (worker i at i without a chief). Rank 0 leads: it serves the
// coordination service on its own TF_CONFIG address. start() is the rendezvous: every task
// registers and publishes its data-plane address, then the ring connects; it waits at most
// session_creation_timeout (TensorFlow's session_creation_timeout_secs) and logs one line when
// every task has joined. From then on health() reports the job's error as soon as any task
// knows it, so every collective stops within seconds when a task dies, hangs or fails.
// shutdown() is the orderly end (every task waits for the others, so nobody tears down a link
// another task still reads); a task that fails instead reports its error to the others.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster/cluster_spec.h"
#include "distribute/net/data_plane.h"
#include "distribute/net/grpc_util.h"

namespace est::distribute {

class CoordinationClient;
class CoordinationServer;
class Ring;

class ClusterRuntime {
 public:
  struct Options {
    ClusterSpec cluster;  // with a chief and/or workers
    TaskSpec task;        // this task: a chief or a worker of `cluster`
    std::string token;    // the job token (job_token_from_environment())
    TlsOptions tls;
    std::chrono::milliseconds session_creation_timeout{std::chrono::hours(2)};
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds heartbeat_timeout{5000};
    std::chrono::milliseconds shutdown_timeout{std::chrono::minutes(10)};
    // Shared-memory channels between ring neighbours on this machine (else TCP only).
    bool shared_memory = true;
  };

  // The rendezvous; throws InvalidArgumentError for a task that cannot train (ps, evaluator,
  // not in the cluster), UnavailableError when an address cannot be bound, DeadlineExceeded
  // naming the missing tasks when they do not all join in time.
  explicit ClusterRuntime(Options options);
  // Without shutdown(): reports that this task is going away with an error, so that the others
  // stop at once instead of waiting for its heartbeats to lapse.
  ~ClusterRuntime();
  ClusterRuntime(const ClusterRuntime&) = delete;
  ClusterRuntime& operator=(const ClusterRuntime&) = delete;

  int rank() const { return rank_; }
  int world() const { return static_cast<int>(names_.size()); }
  bool is_leader() const { return rank_ == 0; }
  // Drawn by the coordination service when it starts: a restarted job has a new one.
  uint64_t job_incarnation() const { return job_incarnation_; }
  const std::string& task_name() const { return names_[static_cast<size_t>(rank_)]; }
  // "worker 1 at 127.0.0.1:2223" for rank r.
  std::string describe(int rank) const;

  Ring& ring() { return *ring_; }
  DataPlane& data_plane() { return *plane_; }
  CoordinationClient& coordination() { return *client_; }
  HealthCheck health() const;

  // Tells every task that this one failed with `error` (best effort, never throws).
  void report_error(const std::exception& error) noexcept;
  // The orderly end of the job (all tasks wait for each other). Idempotent.
  void shutdown();

  // The chief and workers of `cluster` in rank order, as "chief 0", "worker 0", ...
  static std::vector<TaskSpec> training_tasks(const ClusterSpec& cluster);
  static std::string task_name(TaskSpec task);

 private:
  Options options_;
  int rank_ = 0;
  uint64_t job_incarnation_ = 0;
  std::vector<std::string> names_;      // [world]
  std::vector<std::string> addresses_;  // [world], TF_CONFIG addresses
  std::unique_ptr<CoordinationServer> server_;
  std::unique_ptr<CoordinationClient> client_;
  std::unique_ptr<DataPlane> plane_;
  std::unique_ptr<Ring> ring_;
  bool shut_down_ = false;
  bool reported_ = false;
};

}  // namespace est::distribute
