// Synchronous parameter-server jobs of real processes on 127.0.0.1 (free ports, the job token,
// bounded waits, every process killed by pid at the end), each task ps_job_task with its
// TF_CONFIG and --sync_replicas (SyncReplicasOptimizer's semantics):
//  - replicas_to_aggregate = total_num_replicas = the 2 training tasks, in lock-step from the
//    first step (num_tokens = 0), over 2 ps tasks with a partitioned kernel, ends with the
//    checkpoint MultiWorkerMirroredStrategy writes over the same data (each task's own batch of
//    32, the same steps), within float32 rounding;
//  - replicas_to_aggregate = 2 of 3 training tasks (one backup replica, TF's default tokens):
//    every ps task applies exactly one aggregated update per global step, and the job goes on
//    when one of the three is killed;
//  - a worker killed mid-job with no backup replica: the step cannot complete, and the chief
//    fails at once (not after token_timeout) naming the step and the worker; the ps task stops
//    with it.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "distribute/net/job_token.h"
#include "tests/command.h"
#include "tests/distribute/ps_job_util.h"
#include "tests/process_group.h"

namespace est::testing {
namespace {

// Runs a whole job to its end; every task must succeed.
void run_job(ProcessGroup& group, const PsJob& job, const std::vector<std::string>& args) {
  start(group, job, args, distribute::generate_job_token());
  auto codes = group.wait_all(400s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);
}

}  // namespace

TEST_CASE(
    "ps sync job: replicas_to_aggregate = total_num_replicas = 2 gives "
    "MultiWorkerMirroredStrategy's result") {
  ScratchDir dir;
  const std::vector<std::string> common = {"--max_steps", "40",          "--batch",
                                           "32",          "--optimizer", "momentum"};
  // Two ps tasks, the hidden kernel cut in two parts: each task's accumulators and the tokens of
  // ps 0 must agree on every step.
  std::vector<std::string> ps_args = {"--model_dir",  dir / "ps", "--sync_replicas", "2",
                                      "--num_tokens", "0",        "--partitions",    "2"};
  ps_args.insert(ps_args.end(), common.begin(), common.end());
  std::filesystem::create_directories(dir / "ps_logs");
  ProcessGroup ps_job(dir / "ps_logs");
  run_job(ps_job, make_ps_job(1, 2), ps_args);
  for (size_t ps : {2, 3}) {
    std::string line = "ps " + std::to_string(ps - 2) +
                       ": 40 synchronous steps applied (2 gradients averaged into each), 0 stale "
                       "gradients dropped";
    CHECK_MESSAGE(ps_job.output(ps).find(line) != std::string::npos, ps_job.output(ps));
  }

  std::vector<std::string> mwms_args = {"--model_dir", dir / "mwms", "--strategy", "mwms"};
  mwms_args.insert(mwms_args.end(), common.begin(), common.end());
  std::filesystem::create_directories(dir / "mwms_logs");
  ProcessGroup mwms_job(dir / "mwms_logs");
  run_job(mwms_job, make_ps_job(1, 0), mwms_args);

  std::string ps = *checkpoint::latest_checkpoint(dir / "ps");
  std::string mwms = *checkpoint::latest_checkpoint(dir / "mwms");
  CHECK(checkpoint::read_info(ps).global_step == 40);
  CHECK(checkpoint::read_info(mwms).global_step == 40);
  // The step's update in both is momentum's on the mean of the two tasks' gradients; only the
  // order of float32 sums may differ.
  for (const char* name : {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                           "dense/kernel/Momentum", "dense_1/kernel/Momentum"}) {
    INFO(std::string(name));
    std::vector<float> a = checkpoint::load_variable(ps, name).to_vector<float>();
    std::vector<float> b = checkpoint::load_variable(mwms, name).to_vector<float>();
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
      worst =
          std::max(worst, std::abs(double{a[i]} - b[i]) / std::max(1.0, std::abs(double{b[i]})));
    MESSAGE(std::string(name), ": largest difference ", worst);
    CHECK(worst <= 1e-5);
  }
  // And the variables did move: 40 steps from the same start are not the start.
  CHECK(checkpoint::load_variable(ps, "dense_1/bias").to_vector<float>() !=
        std::vector<float>(3, 0.0f));
}

TEST_CASE("ps sync job: replicas_to_aggregate = 2 of 3 training tasks, one update per step") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  // TensorFlow's default tokens (num_tokens = -1): the first steps may aggregate one worker's
  // two batches or drop stale ones; every step is still one aggregated update on each ps task.
  run_job(group, make_ps_job(2, 2),
          {"--model_dir", dir / "model", "--max_steps", "30", "--batch", "16", "--sync_replicas",
           "2", "--total_num_replicas", "3"});
  CHECK(checkpoint::read_info(*checkpoint::latest_checkpoint(dir / "model")).global_step == 30);
  // The two tasks other than the chief may complete one more aggregated step after the chief's
  // last save (the third replica is a backup): 31 updates, none of them lost from the checkpoint.
  for (size_t ps : {3, 4}) {
    const std::string prefix = "ps " + std::to_string(ps - 3) + ": ";
    const std::string tail = " synchronous steps applied (2 gradients averaged into each)";
    const std::string& out = group.output(ps);
    CHECK_MESSAGE((out.find(prefix + "30" + tail) != std::string::npos ||
                   out.find(prefix + "31" + tail) != std::string::npos),
                  out);
  }
  for (size_t t : {0, 1, 2}) CHECK(group.output(t).find("finished") != std::string::npos);
}

TEST_CASE("ps sync job: a worker killed mid-job leaving too few replicas fails the step at once") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  start(group, make_ps_job(1, 1),
        {"--model_dir", dir / "model", "--max_steps", "100000", "--batch", "16", "--step_delay_ms",
         "20", "--sync_replicas", "2", "--num_tokens", "0", "--token_timeout_s", "600"},
        distribute::generate_job_token());
  kill_once_training(group, 1);
  // The ps task sees worker 0's connection end: the chief's step fails at once naming it, not
  // after token_timeout (10 minutes); the ps task stops with the chief's error.
  auto chief = group.wait(0, 60s);
  auto ps = group.wait(2, 30s);
  INFO(group.outputs());
  REQUIRE(chief.has_value());
  CHECK(*chief != 0);
  CHECK(group.output(0).find("cannot complete: the connection from worker 0 ended before it was "
                             "done") != std::string::npos);
  REQUIRE(ps.has_value());
  CHECK(*ps != 0);
}

TEST_CASE("ps sync job: with a backup replica, a worker's death does not stop the job") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  start(group, make_ps_job(2, 1),
        {"--model_dir", dir / "model", "--max_steps", "200", "--batch", "16", "--step_delay_ms",
         "20", "--sync_replicas", "2", "--total_num_replicas", "3", "--token_timeout_s", "60"},
        distribute::generate_job_token());
  kill_once_training(group, 2);  // worker 1
  // The chief and worker 0 are still replicas_to_aggregate: every step completes without it.
  auto chief = group.wait(0, 300s);
  auto worker = group.wait(1, 60s);
  auto ps = group.wait(3, 30s);
  INFO(group.outputs());
  CHECK(chief == 0);
  CHECK(worker == 0);
  CHECK(ps == 0);
  CHECK(checkpoint::read_info(*checkpoint::latest_checkpoint(dir / "model")).global_step == 200);
  CHECK(group.output(3).find("ps 0: 200 synchronous steps applied") != std::string::npos);
}

}  // namespace est::testing
