// train_and_evaluate in local mode: an evaluation after each checkpoint save except the first,
// throttling by throttle_secs on a fake clock (with its log line), a final evaluation, the
// returned metrics, exporters, and the case where max_steps was already reached.
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

TEST_CASE("train_and_evaluate evaluates after each save but the first, then returns metrics") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 5;
  Estimator estimator(linear_model_fn, config);
  auto exporter = std::make_shared<LatestExporter>(
      "latest", build_raw_serving_input_receiver_fn({{"x", {{-1, 2}}}}),
      std::map<std::string, std::string>{}, 2);
  auto [metrics, exports] = train_and_evaluate(
      estimator, {.input_fn = linear_input_fn(64, 4, false, -1), .max_steps = 20},
      {.input_fn = linear_input_fn(16, 4),
       .steps = 2,
       .exporters = {exporter},
       .throttle_secs = 0});
  CHECK(metrics.at("global_step") == 20);
  CHECK(metrics.count("mae") == 1);
  CHECK(steps_of(scalars_in(estimator.eval_dir()), "loss") == std::vector<int64_t>{5, 10, 15, 20});
  // The returned metrics are those of the last evaluation, of the final checkpoint.
  Metrics again = estimator.evaluate(linear_input_fn(16, 4), {.steps = 2});
  CHECK(metrics.at("loss") == doctest::Approx(again.at("loss")));
  REQUIRE(exports.size() == 4);
  CHECK(fs::exists(fs::path(exports.back()) / "model.onnx"));
  CHECK(files_with_prefix(dir / "export/latest", "").size() == 2);  // exports_to_keep
}

TEST_CASE("train_and_evaluate skips evaluations within throttle_secs, logging it") {
  TempDir dir;
  FakeClock clock;
  LogCapture log;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 5;
  config.clock = clock.clock();
  Estimator estimator(linear_model_fn, config);
  // 10 fake seconds per step: saves at 50 s (step 5, evaluated), 100 s (step 10, 50 s after:
  // skipped), 150 s (step 15, evaluated), 200 s (step 20, skipped), then the final evaluation.
  train_and_evaluate(estimator,
                     {.input_fn = linear_input_fn(64, 4, false, -1),
                      .max_steps = 20,
                      .hooks = {std::make_shared<AdvanceClockHook>(clock, 10.0)}},
                     {.input_fn = linear_input_fn(16, 4), .steps = 1, .throttle_secs = 60});
  CHECK(steps_of(scalars_in(estimator.eval_dir()), "loss") == std::vector<int64_t>{5, 15, 20});
  CHECK(log.count("Skip the current checkpoint eval due to throttle secs (60 secs).") == 2);
}

TEST_CASE("train_and_evaluate with max_steps already reached still reports an evaluation") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 6});
  auto [metrics, exports] =
      train_and_evaluate(estimator, {.input_fn = linear_input_fn(64, 4, false, -1), .max_steps = 5},
                         {.input_fn = linear_input_fn(16, 4), .name = "late"});
  CHECK(metrics.at("global_step") == 6);
  CHECK(exports.empty());
  CHECK(steps_of(scalars_in(dir / "eval_late"), "loss") == std::vector<int64_t>{6});
}

TEST_CASE("train_and_evaluate checks its specs") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  CHECK_THROWS_AS(train_and_evaluate(estimator, {}, {.input_fn = linear_input_fn()}),
                  InvalidArgumentError);
  auto exporter = std::make_shared<LatestExporter>(
      "same", build_raw_serving_input_receiver_fn({{"x", {{-1, 2}}}}));
  CHECK_THROWS_WITH_AS(
      train_and_evaluate(estimator, {.input_fn = linear_input_fn()},
                         {.input_fn = linear_input_fn(), .exporters = {exporter, exporter}}),
      doctest::Contains("two exporters are named 'same'"), InvalidArgumentError);
}
