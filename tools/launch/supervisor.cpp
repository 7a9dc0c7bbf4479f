// run_attempt: a poll() loop over the tasks' pipes and the launcher's signalfd.
#include "tools/launch/supervisor.h"

#include <fmt/format.h>
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "ops/logging.h"

namespace est::launch {

using Clock = std::chrono::steady_clock;

std::string TaskFailure::describe() const {
  return fmt::format("{} {}", task_words(task), status.describe());
}

Environment task_environment(const Environment& base, const TaskPlan& plan,
                             const std::string& token, int local_tasks) {
  Environment environment = base;
  environment["TF_CONFIG"] = distribute::to_json(plan.tf_config);
  environment["EST_JOB_TOKEN"] = token;
  environment.erase("EST_JOB_TOKEN_FILE");
  if (local_tasks > 1 && !environment.count("OMP_WAIT_POLICY"))
    environment["OMP_WAIT_POLICY"] = "passive";
  return environment;
}

namespace {

// A running task and the two streams it writes.
struct Task {
  TaskPlan plan;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends; -1 once closed
  std::unique_ptr<LinePrefixer> prefixers[2];
  std::optional<ExitStatus> status;  // set when reaped
};

class Attempt {
 public:
  Attempt(const std::vector<TaskPlan>& plans, const AttemptOptions& options, SignalChannel& signals)
      : options_(options), signals_(signals) {
    int local_tasks = static_cast<int>(plans.size());
    tasks_.reserve(plans.size());
    try {
      for (const TaskPlan& plan : plans) {
        Task& task = tasks_.emplace_back();
        task.plan = plan;
        std::string prefix = fmt::format("[{}] ", task_label(plan.task));
        task.prefixers[0] = std::make_unique<LinePrefixer>(prefix, options.stdout_sink);
        task.prefixers[1] = std::make_unique<LinePrefixer>(prefix, options.stderr_sink);
        ChildProcess child =
            spawn_child(options.command,
                        task_environment(options.environment, plan, options.token, local_tasks),
                        signals.original_mask());
        task.pid = child.pid;
        task.fds[0] = child.stdout_fd;
        task.fds[1] = child.stderr_fd;
      }
    } catch (...) {
      kill_all(SIGKILL);
      for (Task& task : tasks_)
        if (task.pid > 0 && !task.status) {
          int status = 0;
          ::waitpid(task.pid, &status, 0);
          task.status = ExitStatus::from_wait_status(status);
        }
      close_pipes();
      throw;
    }
  }

  ~Attempt() { close_pipes(); }

  AttemptResult run() {
    while (std::any_of(tasks_.begin(), tasks_.end(), [](const Task& t) { return !t.status; })) {
      std::vector<pollfd> polled{{.fd = signals_.fd(), .events = POLLIN, .revents = 0}};
      for (const Task& task : tasks_)
        for (int fd : task.fds)
          if (fd >= 0) polled.push_back({.fd = fd, .events = POLLIN, .revents = 0});
      int timeout = -1;
      if (deadline_) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - Clock::now());
        timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      int ready = ::poll(polled.data(), polled.size(), timeout);
      if (ready < 0 && errno != EINTR) {
        log::error("poll failed: {}; killing every task", ::strerror(errno));
        kill_all(SIGKILL);
        deadline_.reset();
      }
      for (Task& task : tasks_) drain(task);
      for (int signal : signals_.read_pending()) {
        if (signal == SIGCHLD)
          reap();
        else if (is_stop_signal(signal))
          on_stop_signal(signal);
      }
      if (deadline_ && Clock::now() >= *deadline_) kill_after_grace_period();
    }
    finish_output();
    return result_;
  }

 private:
  // Reads what `task` has written so far (non-blocking); closes a stream at its end.
  void drain(Task& task) {
    char buffer[65536];
    for (int stream = 0; stream < 2; ++stream) {
      while (task.fds[stream] >= 0) {
        ssize_t n = ::read(task.fds[stream], buffer, sizeof buffer);
        if (n > 0) {
          task.prefixers[stream]->feed(std::string_view(buffer, static_cast<size_t>(n)));
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          break;
        } else {  // end of stream (or an error: treated as its end)
          task.prefixers[stream]->finish();
          ::close(task.fds[stream]);
          task.fds[stream] = -1;
        }
      }
    }
  }

  void reap() {
    while (true) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Task& task : tasks_)
        if (task.pid == pid && !task.status) {
          task.status = ExitStatus::from_wait_status(status);
          drain(task);  // its output comes before the line about its end
          on_exit(task);
        }
    }
  }

  void on_exit(const Task& task) {
    ExitStatus status = *task.status;
    TaskFailure end{task.plan.task, status};
    if (stopping()) {
      log::info("{}", end.describe());
      return;
    }
    if (!task.plan.trains && !task.plan.serves) {
      if (status.success()) {
        log::info("{}", end.describe());
      } else {
        log::warning("{}; training goes on without evaluation", end.describe());
        result_.evaluator_failure = end;
      }
      return;
    }
    if (!status.success()) {
      log::error("{}; stopping the other tasks", end.describe());
      result_.failure = end;
      begin_stop(SIGTERM);
      return;
    }
    log::info("{}", end.describe());
    bool training_done = std::all_of(tasks_.begin(), tasks_.end(), [](const Task& t) {
      return !t.plan.trains || (t.status && t.status->success());
    });
    if (training_done)
      for (const Task& other : tasks_)
        if (!other.status)
          log::info("training finished; waiting for {} to end", task_words(other.plan.task));
  }

  void on_stop_signal(int signal) {
    if (result_.interrupt_signal == 0) {
      result_.interrupt_signal = signal;
      log::warning("received {}; passing it to every task ({} s before SIGKILL)",
                   signal_name(signal), grace_seconds());
      begin_stop(signal);
    } else {
      log::warning("received {} again; killing every task (SIGKILL)", signal_name(signal));
      kill_all(SIGKILL);
      deadline_.reset();
    }
  }

  bool stopping() const { return result_.failure || result_.interrupt_signal != 0; }

  void begin_stop(int signal) {
    kill_all(signal);
    auto deadline = Clock::now() + options_.grace_period;
    if (!deadline_ || deadline < *deadline_) deadline_ = deadline;
    stop_signal_ = signal;
  }

  void kill_after_grace_period() {
    for (const Task& task : tasks_)
      if (!task.status)
        log::warning("{} did not end within {} s of {}; killing it (SIGKILL)",
                     task_words(task.plan.task), grace_seconds(), signal_name(stop_signal_));
    kill_all(SIGKILL);
    deadline_.reset();
  }

  void kill_all(int signal) {
    for (const Task& task : tasks_)
      if (task.pid > 0 && !task.status) signal_task(task.pid, signal);
  }

  std::string grace_seconds() const {
    return fmt::format("{:g}", static_cast<double>(options_.grace_period.count()) / 1000.0);
  }

  // Every task has ended; what its children (if any still hold the pipes) wrote within a
  // short while is still passed on, then partial lines are ended.
  void finish_output() {
    auto until = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < until) {
      std::vector<pollfd> polled;
      for (const Task& task : tasks_)
        for (int fd : task.fds)
          if (fd >= 0) polled.push_back({.fd = fd, .events = POLLIN, .revents = 0});
      if (polled.empty()) break;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      ::poll(polled.data(), polled.size(), static_cast<int>(std::max<int64_t>(0, left.count())));
      for (Task& task : tasks_) drain(task);
    }
    for (Task& task : tasks_)
      for (auto& prefixer : task.prefixers)
        if (prefixer) prefixer->finish();
    close_pipes();
  }

  void close_pipes() {
    for (Task& task : tasks_)
      for (int& fd : task.fds)
        if (fd >= 0) {
          ::close(fd);
          fd = -1;
        }
  }

  const AttemptOptions& options_;
  SignalChannel& signals_;
  std::vector<Task> tasks_;
  AttemptResult result_;
  std::optional<Clock::time_point> deadline_;  // when tasks still running get SIGKILL
  int stop_signal_ = SIGTERM;
};

}  // namespace

AttemptResult run_attempt(const std::vector<TaskPlan>& plans, const AttemptOptions& options,
                          SignalChannel& signals) {
  Attempt attempt(plans, options, signals);
  return attempt.run();
}

}  // namespace est::launch
