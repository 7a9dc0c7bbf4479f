// Parameter-server jobs of real processes for the ps_jobs tests: a TF_CONFIG per task on
// 127.0.0.1 free ports (the chief, workers, ps tasks, the evaluator), starting the tasks of
// ps_job_task (EST_TEST_PS_JOB_PROGRAM) in a ProcessGroup, reading the chief's final
// "eval: ..." line, bounded waits for a task's output, and a worker killed and restarted mid-job.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "distribute/net/job_token.h"
#include "tests/distribute/task_eval.h"
#include "tests/process_group.h"

namespace est::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline const std::string kTask = EST_TEST_PS_JOB_PROGRAM;

struct PsJob {
  std::vector<std::string> tasks;  // "chief 0", "worker 0", ..., "ps 0", ...
  std::vector<std::string> tf_configs;
};

// The chief, `workers` workers (no "worker" job when 0), `ps` ps tasks (no "ps" job when 0: a
// job of another strategy) and, if `evaluator`, the evaluator, in that order.
inline PsJob make_ps_job(int workers, int ps, bool evaluator = false) {
  std::string cluster = "{\"chief\": [" + loopback_addresses(1) + "]";
  if (workers > 0) cluster += ", \"worker\": [" + loopback_addresses(workers) + "]";
  if (evaluator) cluster += ", \"evaluator\": [" + loopback_addresses(1) + "]";
  if (ps > 0) cluster += ", \"ps\": [" + loopback_addresses(ps) + "]";
  cluster += "}";
  PsJob job;
  auto add = [&](const std::string& type, int index) {
    job.tasks.push_back(type + " " + std::to_string(index));
    job.tf_configs.push_back("{\"cluster\": " + cluster + ", \"task\": {\"type\": \"" + type +
                             "\", \"index\": " + std::to_string(index) + "}}");
  };
  add("chief", 0);
  for (int i = 0; i < workers; ++i) add("worker", i);
  for (int i = 0; i < ps; ++i) add("ps", i);
  if (evaluator) add("evaluator", 0);
  return job;
}

// Starts task t of `job`; its index in `group`.
inline size_t start_task(ProcessGroup& group, const PsJob& job, size_t t,
                         const std::vector<std::string>& args, const std::string& token) {
  std::vector<std::string> argv = {kTask};
  argv.insert(argv.end(), args.begin(), args.end());
  return group.start(argv, {{"TF_CONFIG", job.tf_configs[t]},
                            {"EST_JOB_TOKEN", token},
                            {"OMP_NUM_THREADS", "1"},
                            {"EST_LOG_LEVEL", "INFO"}});
}

inline void start(ProcessGroup& group, const PsJob& job, const std::vector<std::string>& args,
                  const std::string& token) {
  for (size_t t = 0; t < job.tasks.size(); ++t) start_task(group, job, t, args, token);
}

// Waits (at most `timeout`) until child i's output contains `text`.
inline bool wait_for_output(ProcessGroup& group, size_t i, const std::string& text,
                            std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (group.output(i).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Waits (at most 120 s) until task t of `group` has logged a training step, then kills it
// (SIGKILL, by its pid) and checks that it died of that.
inline void kill_once_training(ProcessGroup& group, size_t t) {
  REQUIRE_MESSAGE(wait_for_output(group, t, "loss = ", 120s), group.outputs());
  group.signal(t, SIGKILL);
  CHECK(group.wait(t, 10s) == -SIGKILL);
}

// Runs a job of a chief, worker 0 and ps 0 with `args`: kills worker 0 (SIGKILL) once it has
// logged a step and starts it again with the same TF_CONFIG and token; the chief (waited for at
// most `chief_timeout`), the restarted worker and the ps task must each exit 0, the worker having
// finished its part.
inline void restart_worker_mid_job(ProcessGroup& group, const std::vector<std::string>& args,
                                   std::chrono::seconds chief_timeout) {
  PsJob job = make_ps_job(1, 1);
  std::string token = distribute::generate_job_token();
  start(group, job, args, token);
  kill_once_training(group, 1);
  size_t again = start_task(group, job, 1, args, token);
  auto chief = group.wait(0, chief_timeout);
  auto restarted = group.wait(again, 60s);
  auto ps = group.wait(2, 30s);
  INFO(group.outputs());
  CHECK(chief == 0);
  CHECK(restarted == 0);
  CHECK(ps == 0);
  CHECK(group.output(again).find("finished worker 0") != std::string::npos);
}

}  // namespace est::testing
