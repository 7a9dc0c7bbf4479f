// The ps task of train_and_evaluate (estimator/ps_task.h) in one process: it serves on its
// TF_CONFIG address with the job token, applies pushes with the optimizer of model_fn's train op
// (linear_model_fn: sgd(0.1)), and returns when the chief ends the job.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <future>

#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_variables.h"
#include "estimator/estimator.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/process_group.h"

using namespace est;
using namespace est_test;
using namespace std::chrono_literals;

TEST_CASE("train_and_evaluate on a ps task serves with model_fn's optimizer until the job ends") {
  const std::string token = "ps-estimator-test-token-0123";
  ::setenv("EST_JOB_TOKEN", token.c_str(), 1);
  std::string ps_address = "127.0.0.1:" + std::to_string(testing::free_port());
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.read_tf_config = false;
  config.cluster_spec = distribute::ClusterSpec(
      {{distribute::TaskType::kChief, {"127.0.0.1:" + std::to_string(testing::free_port())}},
       {distribute::TaskType::kPs, {ps_address}}});
  config.task_type = distribute::TaskType::kPs;
  config.task_id = 0;
  config.is_chief = false;
  Estimator ps(linear_model_fn, config);
  auto served = std::async(std::launch::async, [&] {
    train_and_evaluate(ps, {.input_fn = linear_input_fn(), .max_steps = 4},
                       {.input_fn = linear_input_fn(16, 4)});
  });

  distribute::PsClient client({.ps_addresses = {ps_address},
                               .token = token,
                               .task_name = "chief 0",
                               .connect_timeout = 60s});
  distribute::PsPlacement placement(1);
  distribute::PsVariables variables(client, placement);
  nn::VariableStore store;
  {
    ops::NoGradGuard no_grad;
    nn::get_or_create_global_step(store);
    store.create("dense/kernel", Tensor::from_vector<float>({1, 2}, {2, 1}), true);
  }
  variables.place(store, store.names());
  variables.initialize({{"global_step", store.get("global_step").value},
                        {"dense/kernel", store.get("dense/kernel").value}});
  Tensor gradient = Tensor::from_vector<float>({1, -1}, {2, 1});
  CHECK(variables.push_pull({{"dense/kernel", gradient, store.get("dense/kernel").value}}, store,
                            0) == 1);
  std::vector<float> kernel = store.get("dense/kernel").value.to_vector<float>();
  CHECK(kernel[0] == doctest::Approx(0.9));
  CHECK(kernel[1] == doctest::Approx(2.1));
  variables.finish("chief 0", true);
  REQUIRE(served.wait_for(20s) == std::future_status::ready);
  CHECK_NOTHROW(served.get());
}
