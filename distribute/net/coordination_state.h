// CoordinationState: what the coordination service knows about a multi-worker job, and its
// rules, without any networking (distribute/net/coordination_server.h serves it over gRPC).
//
// The leader (the chief, or worker 0 when there is no chief) holds one. Every task registers
// (the rendezvous completes when all have), then sends heartbeats; the state declares a task
// that has been silent for heartbeat_timeout dead, and from then on the job has an error that
// every blocking call returns at once and every heartbeat answer carries: no task waits
// forever for a task that is gone. A task that reports an error (its step threw) stops the job
// the same way, with its own message. Barriers, the key-value store and the shutdown barrier
// are the other meeting points. Blocking calls take a deadline; they return a JobStatus rather
// than throw, so that the server can answer with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/error.h"

namespace est::distribute {

using SteadyTime = std::chrono::steady_clock::time_point;

// An outcome: ok, or an error with its code, message and the task it came from.
struct JobStatus {
  StatusCode code = StatusCode{};  // 0: ok
  std::string message;
  std::string origin;  // "worker:1"; empty when the service itself found it
  bool ok() const { return code == StatusCode{}; }
  static JobStatus error(StatusCode code, std::string message, std::string origin = {}) {
    return {code, std::move(message), std::move(origin)};
  }
};

// What a task tells the service about itself when it registers.
struct TaskRegistration {
  std::string task;  // "worker:1"
  uint64_t incarnation = 0;
  std::string cluster_fingerprint;
  std::string data_address;
  std::string host;
  int64_t pid = 0;
};

struct RendezvousResult {
  JobStatus status;
  std::vector<TaskRegistration> tasks;  // in cluster order, once every task has joined
  uint64_t job_incarnation = 0;
};

struct HeartbeatResult {
  JobStatus status;                   // the job's error, if there is one
  std::vector<std::string> finished;  // tasks in the shutdown barrier
};

class CoordinationState {
 public:
  struct Options {
    std::vector<std::string> tasks;     // every task of the job, in cluster order
    std::vector<std::string> addresses;  // their TF_CONFIG addresses, for messages
    std::string cluster_fingerprint;
    std::chrono::milliseconds heartbeat_timeout{5000};
  };
  explicit CoordinationState(Options options);

  // Blocks until every task has registered (or the deadline passes, or the job fails).
  RendezvousResult register_task(const TaskRegistration& registration, SteadyTime deadline);
  HeartbeatResult heartbeat(const std::string& task, uint64_t incarnation);
  // Blocks until every task has reached barrier `id`.
  JobStatus barrier(const std::string& id, const std::string& task, SteadyTime deadline);
  // Stops the job with `error` (the first error wins; later ones are logged by the caller).
  void report_error(const std::string& task, const JobStatus& error);
  void set(const std::string& key, const std::string& value);
  // Blocks until `key` is set.
  JobStatus get(const std::string& key, SteadyTime deadline, std::string& value);
  // The orderly end: blocks until every task has called shutdown.
  JobStatus shutdown(const std::string& task, SteadyTime deadline);

  // Declares tasks that have been silent for heartbeat_timeout dead (the job's error names
  // them). The server's watchdog thread calls it a few times a second.
  void check_heartbeats();
  // Whether every task has passed the shutdown barrier (the leader may then stop serving).
  bool all_shut_down() const;
  // Whether the job has failed and every task has been answered with its error (or had passed
  // the shutdown barrier): until then the leader keeps serving it, for a bounded time, so that
  // a task that polls only at its next heartbeat, or joins late, still learns why the job
  // stopped instead of finding the service gone.
  bool error_reached_every_task() const;
  JobStatus job_status() const;
  // The leader is going away: every waiting call returns `reason` now.
  void close(const JobStatus& reason);

 private:
  struct Task {
    std::string name;
    std::string address;
    std::optional<TaskRegistration> registration;
    SteadyTime last_heartbeat{};
    bool finished = false;
  };

  int index_of(const std::string& task) const;  // -1 when not a task of the job
  JobStatus unknown_task(const std::string& task) const;
  // Waits on the condition until `done` or the job fails or the deadline passes; what to say
  // on a time-out is `on_timeout()`.
  template <class Done, class OnTimeout>
  JobStatus wait(std::unique_lock<std::mutex>& lock, SteadyTime deadline, Done done,
                 OnTimeout on_timeout);
  void fail_locked(JobStatus error);
  std::string missing_tasks(const std::set<std::string>& arrived) const;
  std::string describe(const Task& task) const;  // "worker:1 at 127.0.0.1:4123"

  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Task> tasks_;
  bool rendezvous_complete_ = false;
  uint64_t job_incarnation_ = 0;
  JobStatus error_;
  std::map<std::string, std::set<std::string>> barriers_;  // id -> arrived tasks
  std::map<std::string, std::string> values_;
  std::set<std::string> shut_down_;  // tasks whose shutdown call has returned ok
  std::set<std::string> told_error_;  // tasks that have been answered with error_
};

}  // namespace est::distribute
