// Where the Estimator runs without a strategy: RunConfig::device, else EST_DEVICE, else
// distribute::local_devices()[0] (the first GPU when there is one); bad names and GPUs that
// cannot be used are errors naming where the name came from; the placement is logged once.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "distribute/strategy.h"
#include "estimator/replicas.h"
#include "ops/backend.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/ops/expect_error.h"

using est::Device;
using est::RunConfig;
using est::detail::default_device;
using est::testing::contains;
using est::testing::error_message;

namespace {

// Sets EST_DEVICE (or unsets it) for the guard's lifetime.
class DeviceEnv {
 public:
  explicit DeviceEnv(const char* value) {
    if (const char* old = getenv("EST_DEVICE")) previous_ = old;
    if (value)
      setenv("EST_DEVICE", value, 1);
    else
      unsetenv("EST_DEVICE");
  }
  ~DeviceEnv() {
    if (previous_)
      setenv("EST_DEVICE", previous_->c_str(), 1);
    else
      unsetenv("EST_DEVICE");
  }

 private:
  std::optional<std::string> previous_;
};

}  // namespace

TEST_CASE("device: the default is local_devices()[0], overridden by EST_DEVICE and RunConfig") {
  {
    DeviceEnv env(nullptr);
    CHECK(default_device(RunConfig{}) == Device::parse(est::distribute::local_devices().front()));
  }
  {
    DeviceEnv env("/cpu:0");
    CHECK(default_device(RunConfig{}) == Device::cpu(0));
    RunConfig config;
    config.device = "/device:CPU:1";  // the field wins over the environment
    CHECK(default_device(config) == Device::cpu(1));
  }
  {
    DeviceEnv env("");  // empty: as if unset
    CHECK(default_device(RunConfig{}) == Device::parse(est::distribute::local_devices().front()));
  }
}

TEST_CASE("device: a bad name or an unusable GPU names where it came from") {
  {
    DeviceEnv env("/tpu:0");
    std::string message =
        error_message<est::InvalidArgumentError>([] { default_device(RunConfig{}); });
    CHECK(contains(message, "EST_DEVICE"));
    CHECK(contains(message, "/tpu:0"));
  }
  DeviceEnv env(nullptr);
  RunConfig config;
  config.device = "/gpu:7";
  if (!est::ops::backend_available(est::ops::Backend::kCuda)) {
    std::string message =
        error_message<est::FailedPreconditionError>([&] { default_device(config); });
    CHECK(contains(message, "RunConfig::device"));
    CHECK(contains(message, "/gpu:7"));
    CHECK(contains(message, est::ops::backend_unavailable_reason(est::ops::Backend::kCuda)));
  } else if (est::distribute::local_devices().size() < 8) {
    CHECK(contains(error_message<est::FailedPreconditionError>([&] { default_device(config); }),
                   "sees only"));
  }
}

TEST_CASE("device: the Estimator logs its placement and trains on the device it names") {
  using namespace est_test;
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.device = "/cpu:3";  // a (logical) CPU device no other case uses
  LogCapture log;
  est::Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn());
  CHECK(estimator.get_variable_value("global_step").item() == 8);
  CHECK(estimator.evaluate(linear_input_fn()).at("loss") >= 0);
  // Once per process and device.
  est::Estimator again(linear_model_fn, config);
  again.train(linear_input_fn());
  size_t count = 0;
  for (const std::string& line : log.lines())
    if (line.find("Running the model on /cpu:3.") != std::string::npos) ++count;
  CHECK(count == 1);
}
