// Every canned classifier and regressor as a TF1 parameter-server job: a chief and a ps task of
// a loopback cluster, on threads of this process. The chief has no train_distribute, so the
// Estimator uses ParameterServerStrategy (TF1's default with ps tasks); the ps task runs
// train_and_evaluate, serving the variables with the canned estimator's own optimizers (wide &
// deep: Ftrl for linear/, Adagrad for dnn/) until the chief ends the job. The chief's
// checkpoint then evaluates as well as single-process training does.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <future>

#include "distribute/distribute.h"
#include "tests/canned/canned_test_util.h"
#include "tests/process_group.h"

using namespace canned_test;
using namespace std::chrono_literals;
using est_test::TempDir;

namespace {

RunConfig task_config(const std::string& model_dir, const distribute::ClusterSpec& cluster,
                      distribute::TaskType type) {
  RunConfig run_config = config(model_dir);
  run_config.read_tf_config = false;
  run_config.cluster_spec = cluster;
  run_config.task_type = type;
  run_config.task_id = 0;
  run_config.is_chief = type == distribute::TaskType::kChief;
  run_config.num_ps_replicas = 1;
  run_config.num_worker_replicas = 1;
  return run_config;
}

// Trains c for 300 steps on a chief and a ps thread into `model_dir`.
void train_with_a_ps_task(const Case& c, const std::string& model_dir) {
  distribute::ClusterSpec cluster(
      {{distribute::TaskType::kChief, {"127.0.0.1:" + std::to_string(testing::free_port())}},
       {distribute::TaskType::kPs, {"127.0.0.1:" + std::to_string(testing::free_port())}}});
  auto ps = std::async(std::launch::async, [&] {
    std::unique_ptr<Estimator> estimator =
        c.make(task_config(model_dir, cluster, distribute::TaskType::kPs));
    train_and_evaluate(*estimator, {.input_fn = train_input(c.task), .max_steps = 300},
                       {.input_fn = eval_input(c.task)});
  });
  auto chief = std::async(std::launch::async, [&] {
    std::unique_ptr<Estimator> estimator =
        c.make(task_config(model_dir, cluster, distribute::TaskType::kChief));
    estimator->train(train_input(c.task), {.max_steps = 300});
  });
  REQUIRE(chief.wait_for(180s) == std::future_status::ready);
  chief.get();
  // The chief is done: the ps task ends by itself.
  REQUIRE(ps.wait_for(30s) == std::future_status::ready);
  ps.get();
}

}  // namespace

TEST_CASE("every canned estimator trains as a TF1 parameter-server job") {
  ::setenv("EST_JOB_TOKEN", "canned-ps-test-token-0123456789", 1);
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    TempDir dir;
    train_with_a_ps_task(c, dir.str());
    Metrics metrics = c.make(config(dir.str()))->evaluate(eval_input(c.task));
    check_trained(c, metrics);
  }
  ::unsetenv("EST_JOB_TOKEN");
}
