// Parameter-server jobs of real processes (ps_job_task, tests/distribute/ps_job_util.h) and the
// checkpoints around them: a checkpoint written in one process under MirroredStrategy restored
// into the ps tasks (the reverse of ps_job_test's resume under MirroredStrategy), a warm start
// whose values reach the ps tasks, and the evaluator of a PS cluster evaluating each new
// checkpoint until the last one. A job of the chief alone makes its start checkpoint exactly
// what the ps tasks hold (no worker's push lands before it).
#include <doctest/doctest.h>

#include <regex>
#include <set>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "distribute/net/job_token.h"
#include "tests/command.h"
#include "tests/distribute/ps_job_util.h"

namespace est::testing {
namespace {

std::vector<float> values(const std::string& checkpoint, const std::string& name) {
  return checkpoint::load_variable(checkpoint, name).to_vector<float>();
}

// A MirroredStrategy run of ps_job_task in one process to `steps` into `model_dir`.
void train_mirrored(const std::string& model_dir, int steps) {
  ProgramResult trained =
      run_program(kTask + " --strategy mirrored --model_dir " + model_dir + " --max_steps " +
                      std::to_string(steps) + " --batch 32 --optimizer momentum",
                  200);
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.output);
}

}  // namespace

TEST_CASE("ps job: a MirroredStrategy checkpoint is restored into the ps tasks") {
  ScratchDir dir;
  train_mirrored(dir / "model", 50);
  std::string mirrored = dir / "model/model.ckpt-50.h5";
  REQUIRE(*checkpoint::latest_checkpoint(dir / "model") == mirrored);
  const char* names[] = {"dense/kernel", "dense/kernel/Momentum", "dense/bias", "dense_1/kernel",
                         "dense_1/bias/Momentum"};
  std::vector<std::vector<float>> before;
  for (const char* name : names) before.push_back(values(mirrored, name));

  // Two ps tasks, the hidden kernel cut in two parts (one on each).
  PsJob job = make_ps_job(0, 2);
  ProcessGroup group(dir.str());
  start(group, job,
        {"--model_dir", dir / "model", "--max_steps", "60", "--batch", "32", "--optimizer",
         "momentum", "--partitions", "2"},
        distribute::generate_job_token());
  auto codes = group.wait_all(240s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);
  CHECK(group.output(0).find("Restoring parameters from " + mirrored) != std::string::npos);
  // The chief's start checkpoint (step 50 again) is read back from the ps tasks: they hold the
  // restored variables and optimizer slots.
  for (size_t i = 0; i < std::size(names); ++i) {
    CAPTURE(names[i]);
    CHECK(values(mirrored, names[i]) == before[i]);
  }
  CHECK(parse_eval(group.output(0)).global_step == 60);
}

TEST_CASE("ps job: a warm start's values reach the ps tasks") {
  ScratchDir dir;
  train_mirrored(dir / "source", 50);
  std::string source = *checkpoint::latest_checkpoint(dir / "source");
  PsJob job = make_ps_job(0, 2);
  ProcessGroup group(dir.str());
  start(group, job,
        {"--model_dir", dir / "model", "--max_steps", "10", "--batch", "32", "--optimizer",
         "momentum", "--warm_start_from", dir / "source"},
        distribute::generate_job_token());
  auto codes = group.wait_all(240s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);
  // The start checkpoint, read back from the ps tasks, holds the warm-started variables.
  std::string start_checkpoint = dir / "model/model.ckpt-0.h5";
  for (const char* name : {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"}) {
    CAPTURE(name);
    CHECK(values(start_checkpoint, name) == values(source, name));
  }
  CHECK(parse_eval(group.output(0)).global_step == 10);
}

TEST_CASE("ps job: the evaluator evaluates each new checkpoint and exits after the last") {
  ScratchDir dir;
  PsJob job = make_ps_job(1, 1, /*evaluator=*/true);
  const size_t evaluator = job.tasks.size() - 1;
  ProcessGroup group(dir.str());
  start(group, job,
        {"--model_dir", dir / "model", "--max_steps", "150", "--batch", "16", "--step_delay_ms",
         "10", "--throttle_secs", "0", "--batch_norm"},
        distribute::generate_job_token());
  auto codes = group.wait_all(300s);
  INFO(group.outputs());
  for (auto code : codes) CHECK(code == 0);
  std::string output = group.output(evaluator);
  CHECK(output.find("Running the evaluator") != std::string::npos);
  // Checkpoints come every 25 steps; each evaluation names its checkpoint's step.
  std::set<long long> evaluated;
  std::regex line(R"(Saving dict for global step (\d+):)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    evaluated.insert(std::stoll((*it)[1]));
  CHECK(evaluated.size() >= 2);
  std::smatch m;
  REQUIRE(std::regex_search(output, m, std::regex(R"(evaluator: loss=[0-9.]+ global_step=(\d+))")));
  long long last = std::stoll(m[1]);
  CHECK(last >= 150);
  CHECK(last == *evaluated.rbegin());
  CHECK(output.find("Exiting evaluation, global_step=" + std::to_string(last)) !=
        std::string::npos);
  // The chief left evaluation to the evaluator; its final checkpoint is the evaluated one.
  CHECK(group.output(0).find("lists no evaluator task") == std::string::npos);
  CHECK(parse_eval(group.output(0)).global_step == last);
}

}  // namespace est::testing
