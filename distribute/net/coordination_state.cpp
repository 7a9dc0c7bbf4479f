// CoordinationState: registration, heartbeats and failure detection, barriers, the key-value
// store and the shutdown barrier, under one mutex and one condition variable (a job has a
// handful of tasks; every change wakes every waiter, which re-checks its own condition).
#include "distribute/net/coordination_state.h"

#include <fmt/format.h>

#include <random>

namespace est::distribute {
namespace {

double seconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

CoordinationState::CoordinationState(Options options) : options_(std::move(options)) {
  for (size_t i = 0; i < options_.tasks.size(); ++i)
    tasks_.push_back({.name = options_.tasks[i],
                      .address = i < options_.addresses.size() ? options_.addresses[i] : ""});
  std::random_device random;
  job_incarnation_ = (uint64_t{random()} << 32) ^ random();
}

int CoordinationState::index_of(const std::string& task) const {
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].name == task) return static_cast<int>(i);
  return -1;
}

JobStatus CoordinationState::unknown_task(const std::string& task) const {
  std::string known;
  for (const Task& t : tasks_) known += (known.empty() ? "" : ", ") + t.name;
  return JobStatus::error(StatusCode::kInvalidArgument,
                          fmt::format("'{}' is not a task of this job (its tasks: {}); every "
                                      "task must be started with the same cluster in TF_CONFIG",
                                      task, known));
}

std::string CoordinationState::describe(const Task& task) const {
  return task.address.empty() ? task.name : task.name + " at " + task.address;
}

std::string CoordinationState::missing_tasks(const std::set<std::string>& arrived) const {
  std::string missing;
  for (const Task& task : tasks_)
    if (!arrived.count(task.name)) missing += (missing.empty() ? "" : ", ") + describe(task);
  return missing;
}

void CoordinationState::fail_locked(JobStatus error) {
  if (!error_.ok()) return;
  error_ = std::move(error);
  changed_.notify_all();
}

template <class Done, class OnTimeout>
JobStatus CoordinationState::wait(std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                                  Done done, OnTimeout on_timeout) {
  for (;;) {
    if (!error_.ok()) return error_;
    if (done()) return {};
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (!error_.ok()) return error_;
      if (done()) return {};
      return on_timeout();
    }
  }
}

RendezvousResult CoordinationState::register_task(const TaskRegistration& registration,
                                                  SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  int index = index_of(registration.task);
  if (index < 0) return {.status = unknown_task(registration.task)};
  if (registration.cluster_fingerprint != options_.cluster_fingerprint)
    return {.status = JobStatus::error(
                StatusCode::kInvalidArgument,
                fmt::format("{} was started with another cluster than the leader's ({} against "
                            "{}); give every task the same \"cluster\" in TF_CONFIG",
                            registration.task, registration.cluster_fingerprint,
                            options_.cluster_fingerprint))};
  Task& task = tasks_[static_cast<size_t>(index)];
  if (task.registration && task.registration->incarnation != registration.incarnation &&
      rendezvous_complete_) {
    fail_locked(JobStatus::error(
        StatusCode::kAborted,
        fmt::format("{} restarted (now pid {} on {}) after the job had started; a job cannot "
                    "continue with a restarted task: restart every task (est-launch "
                    "--max-restarts does), they resume from the last checkpoint",
                    describe(task), registration.pid, registration.host),
        registration.task));
    told_error_.insert(registration.task);
    return {.status = error_};
  }
  task.registration = registration;
  task.last_heartbeat = std::chrono::steady_clock::now();
  task.finished = false;
  changed_.notify_all();
  auto everyone = [&] {
    for (const Task& t : tasks_)
      if (!t.registration) return false;
    return true;
  };
  JobStatus status = wait(lock, deadline, everyone, [&] {
    std::set<std::string> arrived;
    for (const Task& t : tasks_)
      if (t.registration) arrived.insert(t.name);
    return JobStatus::error(StatusCode::kDeadlineExceeded,
                            fmt::format("not every task joined the job in time; missing: {}. "
                                        "Start every task of TF_CONFIG's cluster, or raise "
                                        "session_creation_timeout_secs",
                                        missing_tasks(arrived)));
  });
  RendezvousResult result{.status = status, .job_incarnation = job_incarnation_};
  if (!error_.ok()) told_error_.insert(registration.task);
  if (!status.ok()) return result;
  rendezvous_complete_ = true;
  auto now = std::chrono::steady_clock::now();
  for (Task& t : tasks_) {
    result.tasks.push_back(*t.registration);
    // Heartbeats count from the rendezvous: a task that joined early and waited is not late.
    if (t.last_heartbeat < now) t.last_heartbeat = now;
  }
  return result;
}

HeartbeatResult CoordinationState::heartbeat(const std::string& task, uint64_t incarnation) {
  std::lock_guard lock(mutex_);
  int index = index_of(task);
  if (index < 0) return {.status = unknown_task(task)};
  Task& entry = tasks_[static_cast<size_t>(index)];
  if (!entry.registration)
    return {.status = JobStatus::error(StatusCode::kFailedPrecondition,
                                       task + " sent a heartbeat before registering")};
  if (entry.registration->incarnation != incarnation && error_.ok())
    fail_locked(JobStatus::error(
        StatusCode::kAborted,
        fmt::format("{} sent a heartbeat from another incarnation than the one that registered: "
                    "two processes claim this task; check TF_CONFIG's task on every process",
                    describe(entry)),
        task));
  entry.last_heartbeat = std::chrono::steady_clock::now();
  HeartbeatResult result{.status = error_};
  if (!error_.ok()) told_error_.insert(task);
  for (const Task& t : tasks_)
    if (t.finished) result.finished.push_back(t.name);
  return result;
}

void CoordinationState::check_heartbeats() {
  std::lock_guard lock(mutex_);
  if (!error_.ok() || !rendezvous_complete_) return;
  auto now = std::chrono::steady_clock::now();
  for (const Task& task : tasks_) {
    if (!task.registration || shut_down_.count(task.name)) continue;
    auto silence = now - task.last_heartbeat;
    if (silence > options_.heartbeat_timeout) {
      fail_locked(JobStatus::error(
          StatusCode::kUnavailable,
          fmt::format("{} (pid {} on {}) stopped responding: no heartbeat for {:.1f} s; it died, "
                      "was stopped, or its network is down",
                      describe(task), task.registration->pid, task.registration->host,
                      seconds(silence)),
          task.name));
      return;
    }
  }
}

JobStatus CoordinationState::barrier(const std::string& id, const std::string& task,
                                     SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  if (index_of(task) < 0) return unknown_task(task);
  std::set<std::string>& arrived = barriers_[id];
  arrived.insert(task);
  changed_.notify_all();
  JobStatus status = wait(
      lock, deadline, [&] { return arrived.size() == tasks_.size(); },
      [&] {
        return JobStatus::error(StatusCode::kDeadlineExceeded,
                                fmt::format("barrier '{}' timed out on {}: still waiting for {}",
                                            id, task, missing_tasks(arrived)));
      });
  if (!error_.ok()) told_error_.insert(task);
  return status;
}

void CoordinationState::report_error(const std::string& task, const JobStatus& error) {
  std::lock_guard lock(mutex_);
  JobStatus reported = error;
  if (reported.origin.empty()) reported.origin = task;
  if (reported.ok()) reported.code = StatusCode::kUnknown;
  fail_locked(std::move(reported));
  told_error_.insert(task);  // it knows: it failed, or it already learned of the job's error
}

void CoordinationState::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  values_[key] = value;
  changed_.notify_all();
}

JobStatus CoordinationState::get(const std::string& key, SteadyTime deadline,
                                 std::string& value) {
  std::unique_lock lock(mutex_);
  JobStatus status = wait(
      lock, deadline, [&] { return values_.count(key) > 0; },
      [&] {
        return JobStatus::error(StatusCode::kDeadlineExceeded,
                                fmt::format("no task set key '{}' in time", key));
      });
  if (status.ok()) value = values_.at(key);
  return status;
}

JobStatus CoordinationState::shutdown(const std::string& task, SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  int index = index_of(task);
  if (index < 0) return unknown_task(task);
  tasks_[static_cast<size_t>(index)].finished = true;
  changed_.notify_all();
  auto everyone = [&] {
    for (const Task& t : tasks_)
      if (!t.finished) return false;
    return true;
  };
  JobStatus status = wait(lock, deadline, everyone, [&] {
    std::set<std::string> arrived;
    for (const Task& t : tasks_)
      if (t.finished) arrived.insert(t.name);
    return JobStatus::error(StatusCode::kDeadlineExceeded,
                            fmt::format("the shutdown barrier timed out on {}: {} did not finish",
                                        task, missing_tasks(arrived)));
  });
  if (status.ok()) shut_down_.insert(task);
  if (!error_.ok()) told_error_.insert(task);
  return status;
}

bool CoordinationState::all_shut_down() const {
  std::lock_guard lock(mutex_);
  return shut_down_.size() == tasks_.size();
}

bool CoordinationState::error_reached_every_task() const {
  std::lock_guard lock(mutex_);
  if (error_.ok()) return false;
  for (const Task& task : tasks_)
    if (!told_error_.count(task.name) && !shut_down_.count(task.name)) return false;
  return true;
}

void CoordinationState::close(const JobStatus& reason) {
  std::lock_guard lock(mutex_);
  fail_locked(reason);
}

JobStatus CoordinationState::job_status() const {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace est::distribute
