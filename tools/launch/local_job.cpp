// run_local_job: the restart loop around run_attempt.
#include "tools/launch/local_job.h"

#include <fmt/format.h>

#include <fstream>

#include "distribute/cluster/slurm.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "tools/launch/job_plan.h"
#include "tools/launch/supervisor.h"

#if EST_HAVE_GRPC
#include "distribute/net/job_token.h"
#endif

namespace est::launch {

std::string new_job_token() {
#if EST_HAVE_GRPC
  return distribute::generate_job_token();
#else
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[16];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw UnavailableError("cannot read /dev/urandom for a job token");
  std::string token;
  for (unsigned char byte : bytes) token += fmt::format("{:02x}", byte);
  return token;
#endif
}

namespace {

std::string describe_tasks(const std::vector<TaskPlan>& plans) {
  std::string text;
  for (const TaskPlan& plan : plans) {
    if (!text.empty()) text += ", ";
    text += task_label(plan.task) + " at " +
            plan.tf_config.cluster.task_address(plan.task.type, plan.task.index);
  }
  return text;
}

}  // namespace

JobResult run_local_job(const LocalJobOptions& options, SignalChannel& signals) {
  const int attempts = options.max_restarts + 1;
  distribute::Environment environment = distribute::current_environment();
  if (environment.count("TF_CONFIG"))
    log::warning("TF_CONFIG is set; each task gets its own instead");
  for (int attempt = 1;; ++attempt) {
    std::vector<TaskPlan> plans = plan_local_job(
        options.num_workers, options.evaluator,
        free_loopback_ports(options.num_workers + options.num_ps + (options.evaluator ? 1 : 0)),
        options.num_ps);
    log::info("starting {} task{}{}: {}", plans.size(), plans.size() == 1 ? "" : "s",
              attempts > 1 ? fmt::format(" (attempt {} of {})", attempt, attempts) : "",
              describe_tasks(plans));
    AttemptResult result = run_attempt(plans,
                                       AttemptOptions{.command = options.command,
                                                      .environment = environment,
                                                      .token = new_job_token(),
                                                      .grace_period = options.grace_period,
                                                      .stdout_sink = options.stdout_sink,
                                                      .stderr_sink = options.stderr_sink},
                                       signals);
    if (result.interrupt_signal != 0) {
      log::warning("stopped by {}", signal_name(result.interrupt_signal));
      return JobResult{.exit_code = 128 + result.interrupt_signal,
                       .interrupt_signal = result.interrupt_signal};
    }
    std::string evaluator_note =
        result.evaluator_failure
            ? fmt::format(" (without evaluation: {})", result.evaluator_failure->describe())
            : "";
    if (result.succeeded()) {
      log::info("the job finished{}", evaluator_note);
      return JobResult{.exit_code = 0};
    }
    const TaskFailure& failure = *result.failure;
    if (attempt < attempts) {
      log::warning("restarting the job (attempt {} of {}): {}", attempt + 1, attempts,
                   failure.describe());
      continue;
    }
    if (options.max_restarts > 0)
      log::error("giving up after {} restart{}: {}", options.max_restarts,
                 options.max_restarts == 1 ? "" : "s", failure.describe());
    else
      log::error("the job failed: {}", failure.describe());
    return JobResult{.exit_code = failure.status.shell_code()};
  }
}

}  // namespace est::launch
