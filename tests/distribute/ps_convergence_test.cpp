// Issue 18's proof that asynchronous parameter-server training converges: Fashion-MNIST, a job
// of 2 workers (the chief and worker 0) and 1 ps task on 127.0.0.1, against one process after
// the same number of examples (the job's global_step counts every worker's steps, each of one
// batch, so max_steps batches either way); the test-set accuracies within 1 percentage point.
// Each task is ps_fashion_task (its MLP and data there), with one OpenMP thread and a passive
// wait policy, so that the four processes share two cores without spinning. Skipped when
// dataset-fashion-mnist is not installed.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "data/idx.h"
#include "distribute/net/job_token.h"
#include "tests/command.h"
#include "tests/distribute/task_eval.h"
#include "tests/process_group.h"
#include "tests/skip.h"

namespace est::testing {
namespace {

using namespace std::chrono_literals;

const std::string kTask = EST_TEST_PS_FASHION_PROGRAM;

}  // namespace

TEST_CASE("ps job: asynchronous training on Fashion-MNIST reaches one process's accuracy") {
  std::string probe = std::string(data::kFashionMnistDirectory) + "/t10k-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(probe))
    return skip("dataset-fashion-mnist is not installed (no " + probe + ")");
  // 4000 steps of 64 (4.3 epochs), the rate halved every 1000 steps: with a constant rate the
  // last step's accuracy wanders by a point or more from run to run (0.845-0.866 in three runs
  // of 6000 steps at 0.1), which would hide what is measured here; decayed, the job gave
  // 0.8578-0.8638 in twenty runs against one process's 0.8627 (0.8578-0.8628, 0.8596 on
  // average, in six runs once the pull of a step overlapped the push of the one before).
  constexpr int kSteps = 4000;
  ScratchDir dir;
  auto args = [&](const std::string& model_dir) {
    std::vector<std::string> argv = {kTask, "--model_dir", dir / model_dir, "--max_steps",
                                     std::to_string(kSteps)};
    for (const char* arg : {"--batch", "64", "--learning_rate", "0.2", "--decay_rate", "0.5",
                            "--decay_steps", "1000"})
      argv.push_back(arg);
    return argv;
  };
  std::map<std::string, std::string> environment = {
      {"OMP_NUM_THREADS", "1"},
      {"OMP_WAIT_POLICY", "passive"},
      {"EST_JOB_TOKEN", distribute::generate_job_token()},
      {"EST_LOG_LEVEL", "INFO"}};
  std::string cluster = "{\"chief\": [" + loopback_addresses(1) + "], \"worker\": [" +
                        loopback_addresses(1) + "], \"ps\": [" + loopback_addresses(1) + "]}";
  ProcessGroup group(dir.str());
  for (const char* task :
       {R"("chief", "index": 0)", R"("worker", "index": 0)", R"("ps", "index": 0)"}) {
    environment["TF_CONFIG"] = "{\"cluster\": " + cluster + ", \"task\": {\"type\": " + task + "}}";
    group.start(args("job"), environment);
  }
  environment.erase("TF_CONFIG");  // the reference: one process, the same steps of the same batch
  size_t single = group.start(args("single"), environment);
  auto codes = group.wait_all(240s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);

  Eval job = parse_eval(group.output(0));
  Eval reference = parse_eval(group.output(single));
  MESSAGE("2 workers + 1 ps: accuracy ", job.accuracy, " loss ", job.loss, " at step ",
          job.global_step, "; one process: accuracy ", reference.accuracy, " loss ", reference.loss,
          " at step ", reference.global_step);
  REQUIRE(reference.global_step == kSteps);
  REQUIRE(job.global_step >= kSteps);
  CHECK(job.global_step <= kSteps + 1);  // each worker stops once it sees the last step
  CHECK(reference.accuracy > 0.8);       // trained, not a coin toss over 10 classes
  CHECK(std::abs(job.accuracy - reference.accuracy) <= 0.01);
}

}  // namespace est::testing
