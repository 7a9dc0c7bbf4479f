// est-launch --ps with --max-restarts, end to end: a ps task killed (SIGKILL, by its pid) in
// the middle of an asynchronous job stops every task within 10 s, est-launch names it and
// restarts the job, whose chief restores the last checkpoint into the new ps task, and the job
// finishes. The tasks are ps_job_task (tests/distribute/ps_job_util.h).
#include <doctest/doctest.h>
#include <signal.h>

#include <regex>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "tests/command.h"
#include "tests/distribute/ps_job_util.h"

namespace est::testing {
namespace {

const std::string kLaunch = EST_LAUNCH_PROGRAM;

// The global step of `model_dir`'s latest checkpoint (-1 without one).
long long latest_step(const std::string& model_dir) {
  try {
    std::optional<std::string> latest = checkpoint::latest_checkpoint(model_dir);
    return latest ? checkpoint::read_info(*latest).global_step : -1;
  } catch (const Error&) {  // being replaced while read
    return -1;
  }
}

}  // namespace

TEST_CASE("est-launch --ps 1 --max-restarts 1: a ps task killed mid-job; the job resumes") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  size_t launch = group.start({kLaunch, "-n", "2", "--ps", "1", "--max-restarts", "1",
                               "--grace-period", "5", "--", kTask, "--model_dir", dir / "model",
                               "--max_steps", "200", "--batch", "16", "--step_delay_ms", "20"},
                              {{"OMP_NUM_THREADS", "1"}, {"EST_LOG_LEVEL", "INFO"}});
  REQUIRE_MESSAGE(wait_for_output(group, launch, "[ps:0] started ps 0 pid ", 120s),
                  group.output(launch));
  std::smatch m;
  std::string output = group.output(launch);
  REQUIRE(std::regex_search(output, m, std::regex(R"(\[ps:0\] started ps 0 pid (\d+))")));
  pid_t ps = static_cast<pid_t>(std::stol(m[1]));
  // Mid-job: after the checkpoint of step 50 (of 200).
  auto deadline = Clock::now() + 180s;
  while (latest_step(dir / "model") < 50 && Clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  long long saved = latest_step(dir / "model");
  REQUIRE_MESSAGE(saved >= 50, group.output(launch));
  REQUIRE(saved < 200);
  REQUIRE(::kill(ps, SIGKILL) == 0);
  // The issue's bound: every task of the attempt has stopped within 10 s (est-launch restarts
  // only then), and est-launch said which task failed.
  CHECK_MESSAGE(wait_for_output(group, launch, "restarting the job (attempt 2 of 2)", 10s),
                group.output(launch));
  auto code = group.wait(launch, 300s);
  output = group.output(launch);
  INFO(output);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(output.find("ps 0 exited with status 137 (killed by SIGKILL); stopping the other tasks") !=
        std::string::npos);
  // The second attempt's chief restored a checkpoint of the first (step 50 or later) and the
  // job reached its last step.
  std::string restart = output.substr(output.find("restarting the job (attempt 2 of 2)"));
  REQUIRE(std::regex_search(
      restart, m, std::regex(R"(\[chief:0\].*Restoring parameters from .*model\.ckpt-(\d+)\.h5)")));
  CHECK(std::stoll(m[1]) >= 50);
  CHECK(parse_eval(restart).global_step >= 200);
  CHECK(restart.find("the job finished") != std::string::npos);
}

}  // namespace est::testing
