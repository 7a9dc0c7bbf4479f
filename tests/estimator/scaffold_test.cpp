// Scaffold.init_fn as TF runs it (session_manager.py, prepare_session): once, when the session
// starts from scratch, after the variables are initialised (and warm-started), before the first
// step; never when the run is restored from model_dir's own checkpoint.
#include <doctest/doctest.h>

#include <memory>

#include "distribute/distribute.h"
#include "estimator_test_util.h"

using namespace est_test;
using est::ModeKeys;

namespace {

// y = 2 x0 - x1 + 0.5 exactly: the "pretrained" weights init_fn loads.
void load_pretrained(est::Session& session) {
  session.store().assign("dense/kernel", Tensor::from_vector(std::vector<float>{2, -1}, {2, 1}));
  session.store().assign("dense/bias", Tensor::from_vector(std::vector<float>{0.5f}, {1}));
}

// Records the loss of each step (the forward pass model_fn ran for it), by global step.
class LossRecorder : public est::SessionRunHook {
 public:
  est::SessionRunArgs before_run(est::SessionRunContext&) override { return {{"loss"}, {}}; }
  void after_run(est::SessionRunContext& context, const est::SessionRunValues& values) override {
    losses[context.global_step()] = values.results.at("loss").item();
  }
  void after_create_session(est::Session& session) override {
    kernel_at_start = session.fetch_variable("dense/kernel").to_vector<float>();
    bias_at_start = session.fetch_variable("dense/bias").to_vector<float>();
  }
  std::map<int64_t, double> losses;
  std::vector<float> kernel_at_start, bias_at_start;
};

struct InitFnModel {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  std::function<void(est::Session&)> init_fn;
  est::ModelFn model_fn() const {
    return [calls = calls, init_fn = init_fn](const est::Features& features, const Tensor& labels,
                                              ModeKeys mode, est::ModelContext& ctx) {
      using namespace est::nn;
      Tensor prediction = dense(ctx, features.at("x"), {.units = 1});
      Tensor loss = mean_squared_error(labels, prediction);
      est::Scaffold scaffold{.init_fn = [calls, init_fn](est::Session& session) {
        ++*calls;
        init_fn(session);
      }};
      return est::EstimatorSpec({.mode = mode,
                                 .loss = loss,
                                 .train_op = est::optim::sgd(0.1).minimize(loss, ctx),
                                 .scaffold = scaffold});
    };
  }
};

}  // namespace

TEST_CASE("Scaffold.init_fn runs before step 0's forward pass, and not on a restored run") {
  TempDir dir;
  InitFnModel model{.init_fn = load_pretrained};
  est::Estimator estimator(model.model_fn(), quiet_config(dir.str()));
  auto recorder = std::make_shared<LossRecorder>();
  estimator.train(linear_input_fn(64, 8, false, -1), {.hooks = {recorder}, .steps = 3});
  CHECK(*model.calls == 1);
  // Step 0 already used the loaded weights: the data is fitted exactly.
  REQUIRE(recorder->losses.count(0));
  CHECK(recorder->losses.at(0) < 1e-10);
  CHECK(recorder->kernel_at_start == std::vector<float>{2, -1});

  // Resumed from model_dir's checkpoint: init_fn is not run again, the trained values stay.
  InitFnModel other{.init_fn = [](est::Session& session) {
    session.store().assign("dense/bias", Tensor::from_vector(std::vector<float>{100.0f}, {1}));
  }};
  est::Estimator resumed(other.model_fn(), quiet_config(dir.str()));
  auto second = std::make_shared<LossRecorder>();
  resumed.train(linear_input_fn(64, 8, false, -1), {.hooks = {second}, .steps = 2});
  CHECK(*other.calls == 0);
  CHECK(second->bias_at_start[0] == doctest::Approx(0.5).epsilon(1e-5));
  CHECK(second->losses.at(3) < 1e-10);
}

TEST_CASE("Scaffold.init_fn runs after the warm start and wins over it") {
  TempDir old_dir, new_dir;
  est::Estimator old_model(linear_model_fn, quiet_config(old_dir.str()));
  old_model.train(linear_input_fn(64, 8, false, -1), {.steps = 5});
  std::vector<float> old_kernel = old_model.get_variable_value("dense/kernel").to_vector<float>();

  InitFnModel model{.init_fn = [](est::Session& session) {
    session.store().assign("dense/bias", Tensor::from_vector(std::vector<float>{7.0f}, {1}));
  }};
  est::Estimator estimator(
      model.model_fn(), quiet_config(new_dir.str()), {},
      est::checkpoint::WarmStartSettings{.ckpt_to_initialize_from = old_dir.str()});
  auto recorder = std::make_shared<LossRecorder>();
  estimator.train(linear_input_fn(64, 8, false, -1), {.hooks = {recorder}, .steps = 1});
  CHECK(*model.calls == 1);
  CHECK(recorder->kernel_at_start == old_kernel);              // warm-started
  CHECK(recorder->bias_at_start == std::vector<float>{7.0f});  // init_fn's, assigned after
}

TEST_CASE("Scaffold.init_fn under MirroredStrategy: every replica starts from its values") {
  TempDir dir;
  InitFnModel model{.init_fn = load_pretrained};
  est::RunConfig config = quiet_config(dir.str());
  config.train_distribute = std::make_shared<est::distribute::MirroredStrategy>(
      std::vector<std::string>{"/cpu:0", "/cpu:1"});
  est::Estimator estimator(model.model_fn(), config);
  auto recorder = std::make_shared<LossRecorder>();
  estimator.train(linear_input_fn(64, 8, false, -1), {.hooks = {recorder}, .steps = 2});
  CHECK(*model.calls == 1);
  // The loss of step 0 is over both replicas' batches: exact only if both used the values.
  CHECK(recorder->losses.at(0) < 1e-10);
}

namespace {

// Assigns the exact weights in after_create_session, as an initialising hook does in TF.
class PretrainedHook : public est::SessionRunHook {
 public:
  void after_create_session(est::Session& session) override { load_pretrained(session); }
};

}  // namespace

TEST_CASE("a hook's after_create_session assignments reach the first step's forward pass") {
  // TF's MonitoredSession calls after_create_session before the first run: step 0 (the first
  // evaluation batch, the first predictions) computes with what the hook assigned.
  TempDir dir;
  est::Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto hook = std::make_shared<PretrainedHook>();
  auto recorder = std::make_shared<LossRecorder>();
  estimator.train(linear_input_fn(64, 8, false, -1), {.hooks = {hook, recorder}, .steps = 1});
  REQUIRE(recorder->losses.count(0));
  CHECK(recorder->losses.at(0) < 1e-10);

  TempDir fresh;  // no checkpoint: evaluate and predict start from initialised variables
  est::Estimator untrained(linear_model_fn, quiet_config(fresh.str()));
  CHECK(untrained.evaluate(linear_input_fn(8, 8), {.steps = 1, .hooks = {hook}}).at("loss") <
        1e-10);
  const std::vector<float> x = feature_values(8), y = label_values(8);
  std::vector<est::Predictions> predictions =
      untrained.predict(linear_input_fn(8, 8), {.hooks = {hook}});
  REQUIRE(predictions.size() == 8);
  for (size_t i = 0; i < 8; ++i)
    CHECK(predictions[i].at("y").item() == doctest::Approx(y[i]).epsilon(1e-6));
}
