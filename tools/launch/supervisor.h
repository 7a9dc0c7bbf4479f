// One attempt of a local job: start every task, pass their output on line by line, watch them,
// and stop them all when one training task fails or the launcher is told to stop.
//
// Rules (torchrun's and horovodrun's, with TensorFlow's roles):
//   - A training task (chief or worker) or a ps task (the job cannot go on without the
//     variables it held) that exits non-zero or is killed fails the attempt: the others get
//     SIGTERM, and SIGKILL if they are still running after the grace period.
//     The first failure seen is the attempt's; the others' exits that follow are only logged.
//   - The evaluator's failure is logged and does not stop training: the trained model is the
//     job's product, evaluation a side-car that can be run again from the checkpoints (as a
//     Kubeflow TFJob, whose success follows the chief, treats it).
//   - When every training task has exited 0, the attempt waits for the evaluator and the ps
//     tasks to end on their own (TensorFlow's evaluator stops after evaluating the final
//     checkpoint; est's ps tasks when the chief ends the job).
//   - SIGINT, SIGTERM or SIGHUP to the launcher is passed on to every task (the same signal,
//     to the task's process group); tasks still running after the grace period are killed.
//     A second stop signal kills every task at once.
//   - Before a task's exit is logged, what it wrote is passed on, its last partial line too.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tools/launch/child_process.h"
#include "tools/launch/exit_status.h"
#include "tools/launch/job_plan.h"
#include "tools/launch/line_prefixer.h"
#include "tools/launch/signal_channel.h"

namespace est::launch {

struct AttemptOptions {
  std::vector<std::string> command;  // program and arguments
  Environment environment;           // the launcher's; task_environment() adds to it
  std::string token;                 // this attempt's job token
  std::chrono::milliseconds grace_period{30'000};
  LinePrefixer::Sink stdout_sink;  // where the tasks' stdout and stderr lines go
  LinePrefixer::Sink stderr_sink;
};

struct TaskFailure {
  distribute::TaskSpec task;
  ExitStatus status;
  std::string describe() const;  // "worker 1 exited with status 137 (killed by SIGKILL)"
};

struct AttemptResult {
  std::optional<TaskFailure> failure;            // the first training task that failed
  int interrupt_signal = 0;                      // a stop signal the launcher received
  std::optional<TaskFailure> evaluator_failure;  // logged, not fatal
  bool succeeded() const { return !failure && interrupt_signal == 0; }
};

// A task's environment: the launcher's, plus TF_CONFIG, EST_JOB_TOKEN (EST_JOB_TOKEN_FILE
// removed, since the library refuses both), and OMP_WAIT_POLICY=passive unless the user set
// it and when `local_tasks` > 1 (OpenMP threads that spin-wait take the cores other tasks on
// this machine need). An inherited TF_CONFIG is replaced.
Environment task_environment(const Environment& base, const TaskPlan& plan,
                             const std::string& token, int local_tasks);

// Runs the tasks of `plans` until every one has ended; see the header comment.
AttemptResult run_attempt(const std::vector<TaskPlan>& plans, const AttemptOptions& options,
                          SignalChannel& signals);

}  // namespace est::launch
