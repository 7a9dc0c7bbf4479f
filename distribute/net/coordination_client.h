// CoordinationClient: one task's connection to the coordination service (every task has one,
// the leader too, over loopback to its own server).
//
// It registers (the rendezvous: the call waits for the leader to come up and for every task to
// join, up to session_creation_timeout_secs), then a background thread sends a heartbeat every
// second. The answers carry the job's error once there is one (a task died, stopped answering
// or reported a failure); when the leader itself stops answering for heartbeat_timeout, the
// client declares the leader lost. Either way the error is logged at once, every blocking call
// in progress is cancelled, and has_error() / job_error() tell the data plane to stop waiting:
// a dead or hung task is named on every other task within seconds, and nobody waits forever.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distribute/net/coordination_state.h"
#include "distribute/net/grpc_util.h"

namespace est::distribute {

class CoordinationClient {
 public:
  struct Options {
    std::string leader_address;  // host:port of the coordination service
    std::string leader_task;     // "chief:0", for messages
    std::string task;            // this task, "worker:1"
    std::string token;
    TlsOptions tls;
    std::chrono::milliseconds heartbeat_interval{1000};
    // Silence after which the leader counts as lost (the service uses the same for tasks).
    std::chrono::milliseconds heartbeat_timeout{5000};
  };
  explicit CoordinationClient(Options options);
  ~CoordinationClient();
  CoordinationClient(const CoordinationClient&) = delete;
  CoordinationClient& operator=(const CoordinationClient&) = delete;

  // Joins the job and waits for every task (DeadlineExceededError naming the missing ones
  // after `timeout`); then starts the heartbeats. Returns every task's registration.
  RendezvousResult register_task(const TaskRegistration& registration,
                                 std::chrono::milliseconds timeout);
  void barrier(const std::string& id, std::chrono::milliseconds timeout);
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Tells every task that this one failed (best effort: never throws).
  void report_error(const JobStatus& error) noexcept;
  // The orderly end: waits for every task to finish, then stops the heartbeats.
  void shutdown(std::chrono::milliseconds timeout);

  // Cheap, from any thread: whether the job has failed, and why.
  bool has_error() const { return has_error_.load(std::memory_order_acquire); }
  std::optional<JobStatus> job_error() const;
  // Throws the job's error, if any.
  void check() const;
  // Asks the service now (not at the next heartbeat) whether the job has failed, for up to
  // `grace`: when a peer's connection closes, its error report is usually on its way.
  std::optional<JobStatus> poll_now(std::chrono::milliseconds grace);
  // Tasks that have entered the shutdown barrier, as of the last heartbeat.
  std::set<std::string> finished_tasks() const;
  const Options& options() const { return options_; }

 private:
  // A blocking call: cancelled when the job fails meanwhile.
  template <class Call>
  grpc::Status call(const char* what, std::chrono::steady_clock::time_point deadline,
                    bool wait_for_ready, Call&& rpc);
  void heartbeat_loop();
  void fail(JobStatus error);
  [[noreturn]] void throw_rpc_failure(const char* what, const grpc::Status& status) const;

  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  struct Stub;  // the generated gRPC stub (kept out of this header)
  std::unique_ptr<Stub> stub_;
  uint64_t incarnation_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::optional<JobStatus> error_;
  std::atomic<bool> has_error_ = false;
  std::set<std::string> finished_;
  std::set<grpc::ClientContext*> in_flight_;
  std::thread heartbeats_;
};

}  // namespace est::distribute
