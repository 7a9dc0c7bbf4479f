// RunConfig defaults and cadence rules, EstimatorSpec validation, TrainSpec/EvalSpec defaults,
// Params, and the SecondOrStepTimer rule the periodic hooks share.
#include "estimator/hooks/timer.h"
#include "estimator/specs.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

TEST_CASE("RunConfig has TensorFlow's defaults") {
  RunConfig config;
  CHECK(config.model_dir.empty());
  CHECK_FALSE(config.tf_random_seed.has_value());
  CHECK(config.save_summary_steps == 100);
  CHECK_FALSE(config.checkpoint_steps().has_value());
  CHECK(config.checkpoint_secs() == 600.0);
  CHECK(config.keep_checkpoint_max == 5);
  CHECK(config.keep_checkpoint_every_n_hours == 10000);
  CHECK(config.log_step_count_steps == 100);
  CHECK(config.train_distribute == nullptr);
  CHECK(config.task_type == distribute::TaskType::kWorker);
  CHECK(config.task_id == 0);
  CHECK(config.is_chief);
  CHECK(config.num_worker_replicas == 1);
  CHECK(config.num_ps_replicas == 0);
  CHECK_NOTHROW(config.validate());
}

TEST_CASE("RunConfig checkpoint cadence: steps replace the 600 s default; nullopt disables") {
  RunConfig by_steps{.save_checkpoints_steps = 50};
  CHECK(by_steps.checkpoint_steps() == 50);
  CHECK_FALSE(by_steps.checkpoint_secs().has_value());
  RunConfig by_secs{.save_checkpoints_secs = 30};
  CHECK(by_secs.checkpoint_secs() == 30.0);
  RunConfig neither{.save_checkpoints_secs = std::nullopt};
  CHECK_FALSE(neither.checkpoint_steps().has_value());
  CHECK_FALSE(neither.checkpoint_secs().has_value());
  RunConfig both{.save_checkpoints_steps = 10, .save_checkpoints_secs = 30};
  CHECK_THROWS_WITH_AS(both.validate(), doctest::Contains("both set"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS((RunConfig{.log_step_count_steps = 0}.validate()),
                       doctest::Contains("log_step_count_steps"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS((RunConfig{.save_checkpoints_steps = -1}.validate()),
                       doctest::Contains("save_checkpoints_steps"), InvalidArgumentError);
}

TEST_CASE("RunConfig::replace changes fields on a validated copy") {
  RunConfig config{.model_dir = "/tmp/a"};
  RunConfig changed = config.replace([](RunConfig& c) { c.save_summary_steps = 7; });
  CHECK(changed.save_summary_steps == 7);
  CHECK(changed.model_dir == "/tmp/a");
  CHECK(config.save_summary_steps == 100);
  CHECK_THROWS_AS(config.replace([](RunConfig& c) { c.keep_checkpoint_max = -2; }),
                  InvalidArgumentError);
}

TEST_CASE("EstimatorSpec is validated when built, naming the field") {
  Tensor scalar = Tensor::scalar(1.0);
  CHECK_THROWS_WITH_AS(EstimatorSpec({.mode = ModeKeys::kTrain, .loss = scalar}),
                       doctest::Contains("`train_op` is missing"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(EstimatorSpec({.mode = ModeKeys::kEval}),
                       doctest::Contains("`loss` is missing"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(EstimatorSpec::eval(Tensor::zeros({3})),
                       doctest::Contains("`loss` must be a scalar, got shape [3]"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(EstimatorSpec::predict({}), doctest::Contains("`predictions` is empty"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(EstimatorSpec::predict({{"y", Tensor()}}),
                       doctest::Contains("`predictions[\"y\"]` is undefined"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(EstimatorSpec::eval(scalar, {}, {nullptr}),
                       doctest::Contains("`evaluation_hooks[0]` is a null hook"),
                       InvalidArgumentError);
  EstimatorSpec eval = EstimatorSpec::eval(scalar);
  CHECK(eval.mode == ModeKeys::kEval);
  EstimatorSpec predict = EstimatorSpec::predict({{"y", Tensor::zeros({2, 1})}});
  CHECK(predict.mode == ModeKeys::kPredict);
}

TEST_CASE("TrainSpec and EvalSpec have TensorFlow's defaults and checks") {
  EvalSpec eval{.input_fn = linear_input_fn()};
  CHECK(eval.steps == 100);
  CHECK(eval.start_delay_secs == 120);
  CHECK(eval.throttle_secs == 600);
  CHECK(eval.name.empty());
  CHECK_NOTHROW(validate(eval));
  TrainSpec train{.input_fn = linear_input_fn()};
  CHECK_FALSE(train.max_steps.has_value());
  CHECK_NOTHROW(validate(train));
  CHECK_THROWS_WITH_AS(validate(TrainSpec{}), doctest::Contains("input_fn"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(validate(TrainSpec{.input_fn = linear_input_fn(), .max_steps = 0}),
                       doctest::Contains("max_steps"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(validate(EvalSpec{.input_fn = linear_input_fn(), .steps = -3}),
                       doctest::Contains("steps"), InvalidArgumentError);
}

TEST_CASE("Params: typed lookups with errors naming the parameter") {
  Params params{
      {"learning_rate", 0.5}, {"units", int64_t{3}}, {"name", std::string("x")}, {"flag", true}};
  CHECK(params.get_double("learning_rate") == 0.5);
  CHECK(params.get_double("units") == 3.0);
  CHECK(params.get_int("units") == 3);
  CHECK(params.get_string("name") == "x");
  CHECK(params.get_bool("flag"));
  CHECK(params.get_int("missing", 9) == 9);
  CHECK_THROWS_WITH_AS(params.get_int("missing"), doctest::Contains("'missing'"), NotFoundError);
  CHECK_THROWS_WITH_AS(params.get_int("name"), doctest::Contains("is a string"),
                       InvalidArgumentError);
  nn::VariableStore store;
  ModelContext plain(store);
  CHECK_THROWS_AS(est::params(plain), FailedPreconditionError);
  // An Estimator's context only while a model_fn call uses it.
  RunConfig config;
  EstimatorContext estimator(store, ModeKeys::kTrain, 0, params, config);
  CHECK_THROWS_AS(est::params(estimator), FailedPreconditionError);
  {
    ModelFnCall call(estimator);
    CHECK(&est::params(estimator) == &params);
    CHECK(&est::run_config(estimator) == &config);
    const ModelContext& as_model_context = estimator;
    CHECK(est::params(as_model_context).get_int("units") == 3);
  }
  CHECK_THROWS_AS(est::run_config(estimator), FailedPreconditionError);
}

TEST_CASE("SecondOrStepTimer triggers first, then every N steps or S seconds") {
  hooks::SecondOrStepTimer steps(std::nullopt, 5);
  CHECK(steps.should_trigger_for_step(3));
  steps.update_last_triggered_step(3);
  CHECK_FALSE(steps.should_trigger_for_step(3));
  CHECK_FALSE(steps.should_trigger_for_step(7));
  CHECK(steps.should_trigger_for_step(8));

  FakeClock clock;
  hooks::SecondOrStepTimer secs(10.0, std::nullopt, clock.clock());
  secs.update_last_triggered_step(0);
  clock.advance(9.5);
  CHECK_FALSE(secs.should_trigger_for_step(4));
  clock.advance(0.5);
  CHECK(secs.should_trigger_for_step(4));
  auto elapsed = secs.update_last_triggered_step(4);
  REQUIRE(elapsed.has_value());
  CHECK(elapsed->first == doctest::Approx(10.0));
  CHECK(elapsed->second == 4);
  CHECK_THROWS_AS(hooks::SecondOrStepTimer(1.0, 1), InvalidArgumentError);
}
