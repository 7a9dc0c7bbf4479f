// TF1's default with ps tasks, as a user's program sees it through `#include "est.h"` alone
// (which must declare ParameterServerStrategy, as the README uses it): the Estimator constructed
// with ps tasks in TF_CONFIG and no train_distribute connects to nothing and reads no job token,
// as TensorFlow's constructor only records the config (tensorflow_estimator's estimator.py and
// run_config.py); training connects, waiting for a ps task that comes up later, and fails
// within session_creation_timeout_secs, naming the ps task, when it never does.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <future>
#include <optional>

#include "est.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/process_group.h"

using namespace est;
using namespace est_test;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "ps-connect-test-token-0123";

// The TF_CONFIG of `task` in a cluster of one chief and one ps task at `ps_address`.
std::string tf_config(const std::string& chief_address, const std::string& ps_address,
                      const std::string& task) {
  return R"({"cluster": {"chief": [")" + chief_address + R"("], "ps": [")" + ps_address +
         R"("]}, "task": {"type": ")" + task + R"(", "index": 0}})";
}

std::string loopback() { return "127.0.0.1:" + std::to_string(testing::free_port()); }

}  // namespace

TEST_CASE("est.h declares ParameterServerStrategy") {
  // Without ps tasks in TF_CONFIG it trains in this process.
  ::unsetenv("TF_CONFIG");
  auto strategy = distribute::ParameterServerStrategy::from_env();
  CHECK(strategy->name() == "ParameterServerStrategy");
  CHECK_FALSE(strategy->has_parameter_servers());
}

TEST_CASE("Estimator with ps tasks in TF_CONFIG: a ps host that does not resolve yet, no token") {
  ::unsetenv("EST_JOB_TOKEN");
  ::unsetenv("EST_JOB_TOKEN_FILE");
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.session_creation_timeout_secs = 1;
  // TF's documented host names: a pod whose name does not resolve until it is up.
  config = config.with_tf_config(tf_config(loopback(), "ps-not-up-yet.invalid:2222", "chief"));
  std::optional<Estimator> chief;
  REQUIRE_NOTHROW(chief.emplace(linear_model_fn, config));
  REQUIRE(chief->config().train_distribute != nullptr);
  CHECK(chief->config().train_distribute->name() == "ParameterServerStrategy");
  // Training connects: the token is read then, and a ps task that never comes is named once
  // session_creation_timeout_secs have passed.
  ::setenv("EST_JOB_TOKEN", kToken.c_str(), 1);
  CHECK_THROWS_WITH_AS(
      chief->train(linear_input_fn(), {.max_steps = 3}),
      doctest::Contains("cannot connect to ps 0 at ps-not-up-yet.invalid:2222 within 1 s"),
      UnavailableError);
  ::unsetenv("EST_JOB_TOKEN");
}

TEST_CASE("Estimator with ps tasks in TF_CONFIG: the ps task comes up after the chief") {
  ::setenv("EST_JOB_TOKEN", kToken.c_str(), 1);
  TempDir dir;
  const std::string chief_address = loopback(), ps_address = loopback();
  RunConfig config = quiet_config(dir.str());
  config.session_creation_timeout_secs = 60;
  std::optional<Estimator> chief;
  // Nothing listens at ps_address yet: the constructor returns without waiting for it.
  REQUIRE_NOTHROW(chief.emplace(
      linear_model_fn, config.with_tf_config(tf_config(chief_address, ps_address, "chief"))));
  Estimator ps(linear_model_fn,
               quiet_config(dir.str()).with_tf_config(tf_config(chief_address, ps_address, "ps")));
  auto served = std::async(std::launch::async, [&] {
    train_and_evaluate(ps, {.input_fn = linear_input_fn(), .max_steps = 4},
                       {.input_fn = linear_input_fn(16, 4)});
  });
  chief->train(linear_input_fn(), {.max_steps = 4});
  CHECK(chief->get_variable_value("global_step").item() == 4);
  chief.reset();  // the chief is done: the ps task ends the job
  REQUIRE(served.wait_for(30s) == std::future_status::ready);
  CHECK_NOTHROW(served.get());
  ::unsetenv("EST_JOB_TOKEN");
}
