// Estimator::train/evaluate/predict on a one-layer regression: steps/max_steps arithmetic,
// end of input, resume after a restart (variables, global step and input position continue
// exactly as an uninterrupted run), checkpoint cadence by steps and by seconds (fake clock),
// corrupt-checkpoint fallback, mismatched variables, NaN loss, spec errors, eval metrics and
// predictions recomputed by hand from the trained variables, and the event files written.
#include <fstream>

#include "checkpoint/reader.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

int64_t global_step_of(const Estimator& estimator) {
  return static_cast<int64_t>(estimator.get_variable_value("global_step").item());
}

std::vector<float> values_of(const Tensor& tensor) { return tensor.to_vector<float>(); }

// Predictions of the trained dense layer for example i, by hand.
double predict_by_hand(const Estimator& estimator, int64_t i) {
  auto kernel = values_of(estimator.get_variable_value("dense/kernel"));  // [2, 1]
  auto bias = values_of(estimator.get_variable_value("dense/bias"));      // [1]
  auto x = feature_values(i + 1);
  return static_cast<double>(x[2 * i]) * kernel[0] + static_cast<double>(x[2 * i + 1]) * kernel[1] +
         bias[0];
}

}  // namespace

TEST_CASE("train: steps are incremental, max_steps absolute; both or <= 0 is an error") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto input = linear_input_fn(64, 8, false, -1);
  estimator.train(input, {.steps = 5});
  CHECK(global_step_of(estimator) == 5);
  estimator.train(input, {.steps = 3});
  CHECK(global_step_of(estimator) == 8);
  estimator.train(input, {.max_steps = 12});
  CHECK(global_step_of(estimator) == 12);
  {
    LogCapture log;
    estimator.train(input, {.max_steps = 12});
    CHECK(log.contains("Skipping training since max_steps has already saved."));
  }
  CHECK(global_step_of(estimator) == 12);
  CHECK_THROWS_WITH_AS(estimator.train(input, {.steps = 1, .max_steps = 20}),
                       doctest::Contains("both steps"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(estimator.train(input, {.steps = 0}),
                       doctest::Contains("steps must be positive"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(estimator.train(input, {.max_steps = -1}),
                       doctest::Contains("max_steps must be positive"), InvalidArgumentError);
}

TEST_CASE("train: stops at the end of the input and logs TensorFlow's lines") {
  TempDir dir;
  LogCapture log;
  RunConfig config = quiet_config(dir.str());
  config.log_step_count_steps = 3;
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(60, 8));  // 8 batches (the last of 4)
  CHECK(global_step_of(estimator) == 8);
  CHECK(log.count("Calling model_fn.") == 1);
  CHECK(log.count("Done calling model_fn.") == 1);
  CHECK(log.contains("Create CheckpointSaverHook."));
  CHECK(log.contains(fmt::format("Saving checkpoints for 0 into {}/model.ckpt.", dir.str())));
  CHECK(log.contains(fmt::format("Saving checkpoints for 8 into {}/model.ckpt.", dir.str())));
  CHECK(log.contains("loss = "));
  CHECK(log.count(", step = 0") == 1);
  CHECK(log.count(", step = 3 (") == 1);
  CHECK(log.count(", step = 6 (") == 1);
  CHECK(log.contains("Loss for final step: "));
}

TEST_CASE("train: a restart resumes variables, global step and input position exactly") {
  // An uninterrupted 40-step run is the reference for 20 steps + a new Estimator to 40.
  auto input = linear_input_fn(40, 4, /*shuffle=*/true, -1);
  TempDir reference_dir, resumed_dir;
  Estimator reference(linear_model_fn, quiet_config(reference_dir.str()));
  reference.train(input, {.max_steps = 40});
  {
    Estimator first(linear_model_fn, quiet_config(resumed_dir.str()));
    first.train(input, {.steps = 20});
    CHECK(global_step_of(first) == 20);
  }
  LogCapture log;
  Estimator second(linear_model_fn, quiet_config(resumed_dir.str()));
  second.train(input, {.max_steps = 40});
  CHECK(log.contains("Restoring parameters from " + resumed_dir / "model.ckpt-20.h5"));
  CHECK(global_step_of(second) == 40);
  CHECK(values_of(second.get_variable_value("dense/kernel")) ==
        values_of(reference.get_variable_value("dense/kernel")));
  CHECK(values_of(second.get_variable_value("dense/bias")) ==
        values_of(reference.get_variable_value("dense/bias")));
  // The random streams too: the initializers' stream is where the uninterrupted run left it
  // (restored variables draw nothing), so a variable created later gets the same value.
  for (const char* blob : {"rng/initializer", "rng/model", "iterator"}) {
    CAPTURE(blob);
    auto saved = [&](const std::string& dir) {
      checkpoint::TensorBundle bundle = checkpoint::load(dir + "/model.ckpt-40.h5");
      REQUIRE(bundle.find_blob(blob) != nullptr);
      return bundle.find_blob(blob)->bytes;
    };
    CHECK(saved(resumed_dir.str()) == saved(reference_dir.str()));
  }
}

TEST_CASE("train: an input position from another pipeline is dropped with a warning") {
  TempDir dir;
  Estimator(linear_model_fn, quiet_config(dir.str()))
      .train(linear_input_fn(64, 8, true, -1), {.steps = 3});
  LogCapture log;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto other_pipeline = [](ModeKeys, const InputContext*) {
    Tensor x = Tensor::from_vector(feature_values(16), {16, 2});
    Tensor y = Tensor::from_vector(label_values(16), {16, 1});
    return data::Dataset::from_tensor_slices(Features{{"x", x}}, y)
        .map([](data::Element e) { return e; })
        .batch(4)
        .repeat();
  };
  estimator.train(other_pipeline, {.steps = 2});
  CHECK(log.contains("does not match this input_fn's pipeline"));
  CHECK(global_step_of(estimator) == 5);
}

TEST_CASE("checkpoints: at the start, every save_checkpoints_steps, and at the end") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 5;
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 12});
  CHECK(files_with_prefix(dir.str(), "model.ckpt-") ==
        std::vector<std::string>{dir / "model.ckpt-0.h5", dir / "model.ckpt-10.h5",
                                 dir / "model.ckpt-12.h5", dir / "model.ckpt-5.h5"});
  CHECK(estimator.latest_checkpoint() == dir / "model.ckpt-12.h5");
  auto names = estimator.get_variable_names();
  CHECK(std::find(names.begin(), names.end(), "dense/kernel") != names.end());
  CHECK(std::find(names.begin(), names.end(), "global_step") != names.end());
}

TEST_CASE("checkpoints: save_checkpoints_secs with a fake clock") {
  TempDir dir;
  FakeClock clock;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps.reset();
  config.save_checkpoints_secs = 25;
  config.clock = clock.clock();
  Estimator estimator(linear_model_fn, config);
  // 10 fake seconds per step: saves at 0 s (step 0), 30 s (step 3), 60 s (step 6), end (7).
  estimator.train(linear_input_fn(64, 4, false, -1),
                  {.hooks = {std::make_shared<AdvanceClockHook>(clock, 10.0)}, .steps = 7});
  CHECK(files_with_prefix(dir.str(), "model.ckpt-") ==
        std::vector<std::string>{dir / "model.ckpt-0.h5", dir / "model.ckpt-3.h5",
                                 dir / "model.ckpt-6.h5", dir / "model.ckpt-7.h5"});
}

TEST_CASE("checkpoints: both cadences disabled leaves only the start and end saves") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps.reset();
  config.save_checkpoints_secs.reset();
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 6});
  CHECK(files_with_prefix(dir.str(), "model.ckpt-") ==
        std::vector<std::string>{dir / "model.ckpt-0.h5", dir / "model.ckpt-6.h5"});
}

TEST_CASE("restore: a corrupt latest checkpoint falls back to the previous one") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 5;
  Estimator(linear_model_fn, config).train(linear_input_fn(64, 4, false, -1), {.steps = 10});
  // Damage the newest file: cut it in half (a crash of the disk, not of our writer).
  fs::resize_file(dir / "model.ckpt-10.h5", fs::file_size(dir / "model.ckpt-10.h5") / 2);
  LogCapture log;
  Estimator estimator(linear_model_fn, config);
  // max_steps 6 is below the damaged checkpoint's step: its header cannot be read, so training
  // is not skipped; it resumes from step 5.
  estimator.train(linear_input_fn(64, 4, false, -1), {.max_steps = 6});
  INFO(log.text());
  CHECK(log.contains("Restoring parameters from " + dir / "model.ckpt-5.h5"));
  CHECK(checkpoint::read_info(dir / "model.ckpt-6.h5").global_step == 6);
}

TEST_CASE("restore: variables of another shape are an error naming the variable and shapes") {
  TempDir dir;
  Estimator(linear_model_fn, quiet_config(dir.str())).train(linear_input_fn(), {.steps = 2});
  Estimator wider(linear_model_fn, quiet_config(dir.str()), Params{{"units", int64_t{3}}});
  CHECK_THROWS_WITH_AS(wider.train(linear_input_fn(), {.steps = 1}),
                       doctest::Contains("dense/kernel"), InvalidArgumentError);
  try {
    wider.train(linear_input_fn(), {.steps = 1});
  } catch (const InvalidArgumentError& error) {
    std::string message = error.what();
    CHECK(message.find("[2, 1]") != std::string::npos);
    CHECK(message.find("[2, 3]") != std::string::npos);
    CHECK(message.find("model.ckpt-2.h5") != std::string::npos);
  }
  CHECK(global_step_of(wider) == 2);  // nothing was saved over the good checkpoint
}

TEST_CASE("NaN loss: an error naming the step; the last good checkpoint stays") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 2;
  Estimator estimator(linear_model_fn, config, Params{{"nan_at_step", int64_t{3}}});
  CHECK_THROWS_WITH_AS(estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 10}),
                       doctest::Contains("at global step 3"), NanLossDuringTrainingError);
  CHECK(estimator.latest_checkpoint() == dir / "model.ckpt-2.h5");
  CHECK(std::isfinite(values_of(estimator.get_variable_value("dense/bias"))[0]));
}

TEST_CASE("model_fn and input_fn mistakes are clear errors") {
  TempDir dir;
  auto wrong_mode = [](const Features& f, const Tensor&, ModeKeys, ModelContext& ctx) {
    return EstimatorSpec::predict({{"y", nn::dense(ctx, f.at("x"), {.units = 1})}});
  };
  Estimator estimator(wrong_mode, quiet_config(dir.str()));
  CHECK_THROWS_WITH_AS(estimator.train(linear_input_fn(), {.steps = 1}),
                       doctest::Contains("returned a spec for mode infer"), InvalidArgumentError);
  auto vector_loss = [](const Features& f, const Tensor& labels, ModeKeys, ModelContext& ctx) {
    Tensor y = nn::dense(ctx, f.at("x"), {.units = 1});
    Tensor loss = ops::squared_difference(y, labels);  // [batch, 1]: not reduced
    EstimatorSpecFields fields{.mode = ModeKeys::kEval, .loss = loss};
    return EstimatorSpec(fields);
  };
  Estimator unreduced(vector_loss, quiet_config(dir.str()));
  CHECK_THROWS_WITH_AS(unreduced.evaluate(linear_input_fn()),
                       doctest::Contains("`loss` must be a scalar"), InvalidArgumentError);
  auto no_elements = [](ModeKeys, const InputContext*) { return data::Dataset::range(0); };
  CHECK_THROWS_WITH_AS(unreduced.evaluate(no_elements), doctest::Contains("produced no batch"),
                       OutOfRangeError);
  auto single_tensors = [](ModeKeys, const InputContext*) { return data::Dataset::range(4); };
  CHECK_THROWS_WITH_AS(estimator.train(single_tensors, {.steps = 1}),
                       doctest::Contains("yields single tensors"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(estimator.train(InputFn{}, {.steps = 1}),
                       doctest::Contains("input_fn is empty"), InvalidArgumentError);
  CHECK_THROWS_AS(Estimator(ModelFn{}, quiet_config(dir.str())), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Estimator(linear_model_fn, dir / "a", quiet_config(dir / "b")),
                       doctest::Contains("different values"), InvalidArgumentError);
}

TEST_CASE("an empty model_dir becomes a fresh temporary directory, logged") {
  LogCapture log;
  RunConfig config = quiet_config("");
  Estimator estimator(linear_model_fn, config);
  CHECK_FALSE(estimator.model_dir().empty());
  CHECK(fs::is_directory(estimator.model_dir()));
  CHECK(log.contains("Using temporary folder as model directory: " + estimator.model_dir()));
  fs::remove_all(estimator.model_dir());
}

TEST_CASE("evaluate: metrics, mean loss over batches, global_step, summaries in eval dirs") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 15});
  // 20 examples in batches of 8: 8, 8, 4 (the loss is the mean of the three batch means).
  auto expected = [&](int64_t examples, int64_t batch) {
    auto y = label_values(examples);
    double abs_sum = 0, sq_sum = 0, batch_mean_sum = 0, batch_sq = 0;
    int64_t batches = 0;
    for (int64_t i = 0; i < examples; ++i) {
      double error = predict_by_hand(estimator, i) - y[i];
      abs_sum += std::abs(error);
      sq_sum += error * error;
      batch_sq += error * error;
      if ((i + 1) % batch == 0 || i + 1 == examples) {
        batch_mean_sum += batch_sq / static_cast<double>((i % batch) + 1);
        batch_sq = 0;
        ++batches;
      }
    }
    return std::array<double, 3>{abs_sum / examples, std::sqrt(sq_sum / examples),
                                 batch_mean_sum / batches};
  };
  LogCapture log;
  Metrics all = estimator.evaluate(linear_input_fn(20, 8));
  auto [mae, rmse, loss] = expected(20, 8);
  CHECK(all.at("mae") == doctest::Approx(mae).epsilon(1e-5));
  CHECK(all.at("rmse") == doctest::Approx(rmse).epsilon(1e-5));
  CHECK(all.at("loss") == doctest::Approx(loss).epsilon(1e-5));
  CHECK(all.at("global_step") == 15);
  CHECK(log.contains("Starting evaluation at "));
  CHECK(log.contains("Evaluation [3/?]") == false);
  CHECK(log.contains("Saving dict for global step 15: global_step = 15, loss = "));

  Metrics two = estimator.evaluate(linear_input_fn(20, 8), {.steps = 2, .name = "two"});
  auto [mae2, rmse2, loss2] = expected(16, 8);
  CHECK(two.at("mae") == doctest::Approx(mae2).epsilon(1e-5));
  CHECK(two.at("loss") == doctest::Approx(loss2).epsilon(1e-5));
  CHECK(log.contains("Evaluation [1/2]"));
  CHECK(log.contains("Evaluation [2/2]"));

  auto eval = scalars_in(estimator.eval_dir());
  CHECK(steps_of(eval, "mae") == std::vector<int64_t>{15});
  CHECK(steps_of(eval, "loss") == std::vector<int64_t>{15});
  auto named = scalars_in(dir / "eval_two");
  REQUIRE(steps_of(named, "rmse") == std::vector<int64_t>{15});
  for (const Scalar& s : named)
    if (s.tag == "rmse") CHECK(s.value == doctest::Approx(two.at("rmse")).epsilon(1e-6));
}

TEST_CASE("training writes loss and global_step/sec summaries to model_dir") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_summary_steps = 2;
  config.log_step_count_steps = 3;
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 7});
  auto scalars = scalars_in(dir.str());
  CHECK(steps_of(scalars, "loss") == std::vector<int64_t>{1, 3, 5, 7});
  CHECK(steps_of(scalars, "global_step/sec") == std::vector<int64_t>{4, 7});
}

TEST_CASE("predict: one map per example, predict_keys, values from the trained variables") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 5});
  auto predictions = estimator.predict(linear_input_fn(10, 4));
  REQUIRE(predictions.size() == 10);
  for (int64_t i = 0; i < 10; ++i) {
    CHECK(predictions[i].size() == 2);
    CHECK(predictions[i].at("y").shape() == Shape{1});
    CHECK(predictions[i].at("y").item() == doctest::Approx(predict_by_hand(estimator, i)));
    CHECK(predictions[i].at("double_y").item() ==
          doctest::Approx(2 * predict_by_hand(estimator, i)));
  }
  auto only_y = estimator.predict(linear_input_fn(10, 4), {.predict_keys = {"y"}});
  REQUIRE(only_y.size() == 10);
  CHECK(only_y[3].size() == 1);
  CHECK(only_y[3].count("y") == 1);
  CHECK_THROWS_WITH_AS(estimator.predict(linear_input_fn(10, 4), {.predict_keys = {"z"}}),
                       doctest::Contains("'z'"), NotFoundError);
  int seen = 0;
  estimator.predict(linear_input_fn(10, 4), [&](Predictions) { return ++seen < 3; });
  CHECK(seen == 3);
}

TEST_CASE("predict without yield_single_examples: one map per batch, as model_fn made it") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 5});
  // 10 examples in batches of 4: 4, 4 and 2 rows, the same values as one map per example.
  auto batches = estimator.predict(linear_input_fn(10, 4),
                                   {.predict_keys = {"y"}, .yield_single_examples = false});
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].size() == 1);
  CHECK(batches[0].at("y").shape() == Shape{4, 1});
  CHECK(batches[2].at("y").shape() == Shape{2, 1});
  std::vector<float> rows;
  for (const Predictions& batch : batches)
    for (float value : batch.at("y").to_vector<float>()) rows.push_back(value);
  REQUIRE(rows.size() == 10);
  for (int64_t i = 0; i < 10; ++i) CHECK(rows[i] == doctest::Approx(predict_by_hand(estimator, i)));
  int seen = 0;
  estimator.predict(linear_input_fn(10, 4), [&](Predictions) { return ++seen < 2; },
                    {.yield_single_examples = false});
  CHECK(seen == 2);
}

TEST_CASE("warm_start_from initialises a new model from another model's checkpoint") {
  TempDir source, target;
  Estimator trained(linear_model_fn, quiet_config(source.str()));
  trained.train(linear_input_fn(64, 8, false, -1), {.steps = 10});
  Estimator warm(linear_model_fn, quiet_config(target.str()), {},
                 checkpoint::WarmStartSettings{.ckpt_to_initialize_from = source.str()});
  warm.train(linear_input_fn(64, 8, false, -1), {.steps = 1});
  Tensor start_kernel = checkpoint::load_variable(target / "model.ckpt-0.h5", "dense/kernel");
  CHECK(values_of(start_kernel) == values_of(trained.get_variable_value("dense/kernel")));
  CHECK(global_step_of(warm) == 1);
}

TEST_CASE("model_fn reaches params and config through ctx") {
  TempDir dir;
  double seen_rate = 0;
  std::string seen_dir;
  auto model_fn = [&](const Features& f, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    seen_rate = est::params(ctx).get_double("learning_rate");
    seen_dir = est::run_config(ctx).model_dir;
    return linear_model_fn(f, labels, mode, ctx);
  };
  Estimator estimator(model_fn, quiet_config(dir.str()), Params{{"learning_rate", 0.25}});
  estimator.train(linear_input_fn(), {.steps = 1});
  CHECK(seen_rate == 0.25);
  CHECK(seen_dir == dir.str());
}

TEST_CASE("evaluate and predict can use an older checkpoint by path") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 5;
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 10});
  Metrics older =
      estimator.evaluate(linear_input_fn(8, 4), {.checkpoint_path = dir / "model.ckpt-5.h5"});
  CHECK(older.at("global_step") == 5);
  CHECK(estimator.evaluate(linear_input_fn(8, 4)).at("global_step") == 10);
  auto bias_at_5 = checkpoint::load_variable(dir / "model.ckpt-5.h5", "dense/bias").item();
  auto kernel_at_5 =
      checkpoint::load_variable(dir / "model.ckpt-5.h5", "dense/kernel").to_vector<float>();
  auto x = feature_values(1);
  auto first = estimator.predict(
      linear_input_fn(4, 4), {.predict_keys = {"y"}, .checkpoint_path = dir / "model.ckpt-5.h5"});
  CHECK(first.at(0).at("y").item() ==
        doctest::Approx(x[0] * kernel_at_5[0] + x[1] * kernel_at_5[1] + bias_at_5));
  CHECK_THROWS_AS(estimator.evaluate(linear_input_fn(8, 4), {.checkpoint_path = dir / "nope.h5"}),
                  NotFoundError);
}
