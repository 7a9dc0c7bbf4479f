// est-launch: start a multi-worker job on this machine, or one task of a SLURM step.
//
//   est-launch -n N [--ps M] [--evaluator] [--max-restarts K] [--grace-period S] [--] program...
//       N processes on this machine (chief:0, worker:0..N-2, ps:0..M-1, evaluator:0), each with its
//       TF_CONFIG and the job's token; their output lines prefixed "[worker:1] "; SIGINT,
//       SIGTERM and SIGHUP passed on; when a training task fails the others are stopped and
//       est-launch exits with that task's status (128 + N for signal N), or restarts every task
//       up to K times (tools/launch/local_job.h).
//   srun est-launch --slurm [--port-base P] [--ps M] [--evaluator] [--] program args...
//       TF_CONFIG from SLURM's environment (rank 0 the chief, then the evaluator, the M ps tasks,
//       the workers), then exec (tools/launch/slurm_launch.h).
//   est-launch --generate-token
//       prints a new job token (for EST_JOB_TOKEN or a Kubernetes secret).
// A usage error names the flag and exits 2; a launcher error (no such program, a malformed
// SLURM environment) is logged and exits 127 (program not found) or 1.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "ops/error.h"
#include "ops/logging.h"
#include "tools/launch/child_process.h"
#include "tools/launch/job_plan.h"
#include "tools/launch/line_prefixer.h"
#include "tools/launch/local_job.h"
#include "tools/launch/signal_channel.h"
#include "tools/launch/slurm_launch.h"

namespace {

using namespace est;
using namespace est::launch;

constexpr const char* kFooter =
    "Forms:\n"
    "  est-launch -n N [--ps M] [--evaluator] [--max-restarts K] [--grace-period S] [--] "
    "program args...\n"
    "  srun est-launch --slurm [--port-base P] [--ps M] [--evaluator] [--] program args...\n"
    "  est-launch --generate-token\n"
    "Examples:\n"
    "  est-launch -n 3 --evaluator -- build/examples/multi_worker --model_dir /tmp/job\n"
    "  est-launch -n 3 --ps 1 -- build/examples/ps_job --model_dir /tmp/ps_job\n"
    "  export EST_JOB_TOKEN=$(est-launch --generate-token)\n"
    "  srun --ntasks=8 est-launch --slurm -- build/examples/multi_worker --model_dir /shared/job\n"
    "The tasks' output lines start with their task, \"[chief:0] \"; est-launch exits with the\n"
    "failed task's status (128 + N when signal N killed it).";

struct Flags {
  int num_workers = 0;
  bool evaluator = false;
  int num_ps = 0;
  int max_restarts = 0;
  double grace_period = 30;
  bool slurm = false;
  int port_base = 8888;
  bool generate_token = false;
};

// The launcher's own lines, "WARNING:est-launch:restarting the job ...", one write each, so
// they never split a task's line.
void log_to_stderr() {
  LinePrefixer::Sink stderr_sink = fd_sink(2);
  log::set_sink([stderr_sink](log::Level level, std::string_view message) {
    stderr_sink(fmt::format("{}:est-launch:{}\n", log::level_name(level), message));
  });
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app("est-launch: start a multi-worker est job, each task with its TF_CONFIG.",
               "est-launch");
  app.footer(kFooter);
  auto* num_workers = app.add_option("-n,--num-workers", flags.num_workers,
                                     "training processes on this machine: the chief and N-1 "
                                     "workers")
                          ->check(CLI::PositiveNumber);
  app.add_flag("--evaluator", flags.evaluator,
               "one more process, the evaluator (its failure does not stop training)");
  auto* num_ps = app.add_option("--ps", flags.num_ps,
                                "parameter-server processes (ps:0..M-1, TF_CONFIG's \"ps\" "
                                "job; with --slurm, M of the step's tasks); a ps task that "
                                "fails fails the job")
                     ->check(CLI::NonNegativeNumber);
  auto* max_restarts =
      app.add_option("--max-restarts", flags.max_restarts,
                     "after a training task fails, restart every task up to K times")
          ->check(CLI::NonNegativeNumber);
  app.add_option("--grace-period", flags.grace_period,
                 "seconds between SIGTERM (or the signal passed on) and SIGKILL when stopping "
                 "tasks")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* slurm = app.add_flag("--slurm", flags.slurm,
                             "under srun: TF_CONFIG from SLURM's environment, then run the "
                             "program in place of est-launch");
  auto* port_base = app.add_option("--port-base", flags.port_base,
                                   "with --slurm: the first port of each node's tasks")
                        ->check(CLI::Range(1, 65535))
                        ->capture_default_str();
  auto* token =
      app.add_flag("--generate-token", flags.generate_token, "print a new job token and exit");
  slurm->excludes(num_workers)->excludes(max_restarts);
  port_base->needs(slurm);
  token->excludes(num_workers)->excludes(slurm)->excludes(num_ps);
  app.prefix_command();  // the program's own flags are not est-launch's
  std::vector<std::string> command;
  try {
    app.parse(argc, argv);
    command = app.remaining();
    if (!command.empty() && command.front() == "--") {
      command.erase(command.begin());
    } else if (!command.empty() && command.front().starts_with("-")) {
      throw CLI::ExtrasError({command.front()});
    }
    if (flags.generate_token) {
      if (!command.empty()) throw CLI::ExtrasError(command);
    } else {
      if (command.empty()) throw CLI::RequiredError("program");
      if (!flags.slurm && flags.num_workers == 0) throw CLI::RequiredError("-n,--num-workers");
    }
  } catch (const CLI::ParseError& error) {
    // --help prints the help and exits 0; a usage error names the flag and exits 2.
    int status = app.exit(error);
    return status == 0 ? 0 : 2;
  }

  log_to_stderr();
  try {
    if (flags.generate_token) {
      fmt::print("{}\n", new_job_token());
      return 0;
    }
    if (flags.slurm) {
      SlurmLaunch launch = prepare_slurm_launch(
          distribute::current_environment(),
          SlurmLaunchOptions{
              .port_base = flags.port_base, .evaluator = flags.evaluator, .num_ps = flags.num_ps});
      const auto& task = launch.task;
      log::info("SLURM rank {} on {} is {} (TF_CONFIG={})", task.rank, task.host,
                task_label(*task.tf_config.task), launch.environment["TF_CONFIG"]);
      return exec_program(command, launch.environment);
    }
    if (find_program(command.front(), distribute::current_environment()).empty()) {
      log::error("cannot run '{}': no such executable{}", command.front(),
                 command.front().find('/') == std::string::npos ? " in PATH" : "");
      return 127;
    }
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout drops the tasks' output, not the launcher
    SignalChannel signals;
    JobResult result =
        run_local_job(LocalJobOptions{.num_workers = flags.num_workers,
                                      .evaluator = flags.evaluator,
                                      .num_ps = flags.num_ps,
                                      .max_restarts = flags.max_restarts,
                                      .grace_period = std::chrono::milliseconds(
                                          static_cast<int64_t>(flags.grace_period * 1000.0)),
                                      .command = command,
                                      .stdout_sink = fd_sink(1),
                                      .stderr_sink = fd_sink(2)},
                      signals);
    if (result.interrupt_signal != 0) die_by_signal(result.interrupt_signal);
    return result.exit_code;
  } catch (const est::Error& error) {
    log::error("{}: {}", est::status_code_name(error.code()), error.what());
    return 1;
  } catch (const std::exception& error) {
    log::error("{}", error.what());
    return 1;
  }
}
