// prepare_slurm_launch and exec_program: --slurm mode.
#include "tools/launch/slurm_launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>

#include "ops/error.h"
#include "ops/logging.h"
#include "tools/launch/job_plan.h"

namespace est::launch {

using distribute::TaskType;

SlurmLaunch prepare_slurm_launch(const distribute::Environment& environment,
                                 const SlurmLaunchOptions& options) {
  if (!distribute::in_slurm_step(environment))
    throw InvalidArgumentError(
        "--slurm: SLURM_PROCID and SLURM_STEP_NODELIST are not set; run it under "
        "srun (`srun est-launch --slurm -- program ...`), or use -n N on one machine");
  // The step's size first (every task a worker), then the layout.
  distribute::SlurmOptions slurm{.port_base = options.port_base, .jobs = {}};
  int num_tasks = distribute::resolve_slurm(environment, slurm).tf_config.cluster.num_tasks();
  if (options.num_ps < 0)
    throw InvalidArgumentError(fmt::format("--ps {}: give 0 or more ps tasks", options.num_ps));
  int minimum = 1 + (options.evaluator ? 1 : 0) + options.num_ps;
  if (num_tasks < minimum) {
    std::string flags = options.evaluator ? " --evaluator" : "";
    std::vector<std::string> needs = {"the chief"};
    if (options.evaluator) needs.push_back("the evaluator");
    if (options.num_ps > 0) {
      flags += fmt::format(" --ps {}", options.num_ps);
      needs.push_back(fmt::format("{} ps task(s)", options.num_ps));
    }
    std::string last = needs.back();
    needs.pop_back();
    throw InvalidArgumentError(fmt::format(
        "--slurm{}: the step has {} task(s); it needs {}{} (srun --ntasks={} or more)", flags,
        num_tasks, needs.empty() ? "" : fmt::format("{} and ", fmt::join(needs, ", ")), last,
        minimum));
  }
  slurm.jobs[TaskType::kChief] = 1;
  if (options.evaluator) slurm.jobs[TaskType::kEvaluator] = 1;
  if (options.num_ps > 0) slurm.jobs[TaskType::kPs] = options.num_ps;
  if (num_tasks > minimum) slurm.jobs[TaskType::kWorker] = num_tasks - minimum;

  SlurmLaunch launch{.task = distribute::resolve_slurm(environment, slurm),
                     .environment = environment};
  if (num_tasks > 1 && !environment.count("EST_JOB_TOKEN") &&
      !environment.count("EST_JOB_TOKEN_FILE"))
    throw InvalidArgumentError(fmt::format(
        "--slurm: the step's {} tasks need a shared job token and neither "
        "EST_JOB_TOKEN nor EST_JOB_TOKEN_FILE is set; before srun, run `export "
        "EST_JOB_TOKEN=$(est-launch --generate-token)` (srun passes the environment on), or "
        "set EST_JOB_TOKEN_FILE to a file every node can read",
        num_tasks));
  if (environment.count("TF_CONFIG"))
    log::warning("--slurm: TF_CONFIG is set; replacing it with SLURM's");
  launch.environment["TF_CONFIG"] = distribute::to_json(launch.task.tf_config);
  if (launch.task.tasks_on_node > 1 && !environment.count("OMP_WAIT_POLICY"))
    launch.environment["OMP_WAIT_POLICY"] = "passive";
  return launch;
}

int exec_program(const std::vector<std::string>& command,
                 const distribute::Environment& environment) {
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : environment) env_strings.push_back(key + "=" + value);
  std::vector<char*> env_pointers, arg_pointers;
  for (std::string& entry : env_strings) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> args = command;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  ::execvpe(arg_pointers[0], arg_pointers.data(), env_pointers.data());
  int error = errno;
  log::error("cannot run '{}': {}", command[0], ::strerror(error));
  return error == ENOENT ? 127 : 126;
}

}  // namespace est::launch
