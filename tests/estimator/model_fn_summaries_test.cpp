// Summaries and named tensors from inside model_fn (tf.compat.v1.summary.* and tf.identity in a
// TF1 model_fn): tags as TF makes them (scope prefix, clean_tag, "_1" for a repeated name,
// "<name>/image/<i>"), written by the Estimator's SummarySaverHook every save_summary_steps
// with the values of the step they were recorded in, read back from model_dir's event files;
// eval metrics in model_dir/eval; tensors fetched by name by LoggingTensorHook and
// SummarySaverHook.
#include <doctest/doctest.h>

#include <numeric>

#include "estimator/summary_encoding.h"
#include "estimator_test_util.h"

using namespace est_test;
using est::ModeKeys;
using est::SummaryEvent;

namespace {

// Image i of the batch: 2x2 grayscale, values -1, 0, 0.5, 1 scaled by (i + 1).
Tensor image_batch() {
  std::vector<float> values;
  for (int i = 0; i < 3; ++i)
    for (float v : {-1.0f, 0.0f, 0.5f, 1.0f}) values.push_back(v * static_cast<float>(i + 1));
  return Tensor::from_vector(values, {3, 2, 2, 1});
}

est::EstimatorSpec summarising_model_fn(const est::Features& features, const Tensor& labels,
                                        ModeKeys mode, est::ModelContext& ctx) {
  using namespace est::nn;
  namespace summary = est::summary;
  const Tensor& x = features.at("x");
  Tensor prediction = dense(ctx, x, {.units = 1});
  Tensor loss = mean_squared_error(labels, prediction);
  summary::scalar("learning_rate", Tensor::scalar(0.1), ctx);
  summary::scalar("learning_rate", Tensor::scalar(0.2), ctx);  // -> learning_rate_1
  summary::histogram("features", x, ctx);
  summary::image("input", image_batch(), ctx, 2);
  summary::image("first", image_batch(), ctx, 1);
  summary::text("note", std::string("hello"), ctx);
  {
    auto scope = ctx.variable_scope("head");
    summary::scalar("x mean:", est::ops::mean(x), ctx);  // -> head/x_mean_
    est::identity(est::ops::mean(prediction), "prediction_mean", ctx);
  }
  return est::EstimatorSpec(
      {.mode = mode,
       .loss = loss,
       .train_op = est::optim::sgd(0.1).minimize(loss, ctx),
       .eval_metric_ops = {{"mae", est::metrics::mean_absolute_error(labels, prediction)}}});
}

std::vector<SummaryEvent> summaries_in(const std::string& dir) {
  std::vector<SummaryEvent> all;
  for (const std::string& file : est::event_files(dir))
    for (SummaryEvent& event : est::read_summaries(file)) all.push_back(std::move(event));
  return all;
}

std::vector<int64_t> steps_with(const std::vector<SummaryEvent>& events, const std::string& tag) {
  std::vector<int64_t> steps;
  for (const SummaryEvent& event : events)
    if (event.tag == tag) steps.push_back(event.step);
  return steps;
}

const SummaryEvent& at(const std::vector<SummaryEvent>& events, const std::string& tag,
                       int64_t step) {
  for (const SummaryEvent& event : events)
    if (event.tag == tag && event.step == step) return event;
  FAIL("no summary ", tag, " at step ", step);
  throw;
}

}  // namespace

TEST_CASE("summaries recorded in model_fn are written every save_summary_steps with TF's tags") {
  TempDir dir;
  est::RunConfig config = quiet_config(dir.str());
  config.save_summary_steps = 2;
  est::Estimator estimator(summarising_model_fn, config);
  estimator.train(linear_input_fn(64, 8), {.steps = 5});

  std::vector<SummaryEvent> events = summaries_in(dir.str());
  // The saver's steps (the global step after the step: 1, then every 2), for every kind.
  std::vector<int64_t> expected{1, 3, 5};
  CHECK(steps_with(events, "loss") == expected);
  CHECK(steps_with(events, "learning_rate") == expected);
  CHECK(steps_with(events, "learning_rate_1") == expected);
  CHECK(steps_with(events, "features") == expected);
  CHECK(steps_with(events, "head/x_mean_") == expected);
  CHECK(steps_with(events, "note") == expected);
  CHECK(steps_with(events, "input/image/0") == expected);
  CHECK(steps_with(events, "input/image/1") == expected);
  CHECK(steps_with(events, "input/image/2").empty());    // max_outputs 2
  CHECK(steps_with(events, "first/image") == expected);  // max_outputs 1: no index

  CHECK(at(events, "learning_rate", 3).scalar == doctest::Approx(0.1));
  CHECK(at(events, "learning_rate_1", 3).scalar == doctest::Approx(0.2));
  CHECK(at(events, "note", 1).kind == SummaryEvent::Kind::kText);
  CHECK(at(events, "note", 1).text == "hello");
  CHECK(at(events, "note", 1).plugin_name == "text");

  // Values are the recording step's: the step ending at global step s read batch s - 1 (rows
  // 8 (s - 1) ... 8 s - 1, unshuffled).
  std::vector<float> all_x = feature_values(64);
  for (int64_t step : expected) {
    std::vector<double> batch(all_x.begin() + 16 * (step - 1), all_x.begin() + 16 * step);
    const SummaryEvent& histogram = at(events, "features", step);
    REQUIRE(histogram.kind == SummaryEvent::Kind::kHistogram);
    est::Histogram want = est::histogram_of(batch, "features");
    CHECK(histogram.histogram.num == 16);
    CHECK(histogram.histogram.sum == doctest::Approx(want.sum));
    CHECK(histogram.histogram.bucket == want.bucket);
    CHECK(histogram.histogram.bucket_limit == want.bucket_limit);
    double mean = std::accumulate(batch.begin(), batch.end(), 0.0) / 16;
    CHECK(at(events, "head/x_mean_", step).scalar == doctest::Approx(mean).epsilon(1e-6));
  }

  // Images, normalised as TF's ImageSummary op: image 0 has a negative value, so 0 maps to 128
  // and the scale is 127 / max|v| (truncated): -1 -> 1, 0 -> 128, 0.5 -> 191, 1 -> 255.
  const SummaryEvent& image0 = at(events, "input/image/0", 1);
  REQUIRE(image0.kind == SummaryEvent::Kind::kImage);
  CHECK(image0.image_height == 2);
  CHECK(image0.image_width == 2);
  CHECK(image0.image_colorspace == 1);
  CHECK(image0.image_png == est::encode_png({1, 128, 191, 255}, 2, 2, 1));
  // Image 1 is image 0 times 2: the same after normalisation.
  CHECK(at(events, "input/image/1", 1).image_png == image0.image_png);
}

TEST_CASE("summaries of a non-negative float image: scaled so that the largest value is 255") {
  TempDir dir;
  est::RunConfig config = quiet_config(dir.str());
  config.save_summary_steps = 1;
  est::Estimator estimator(
      [](const est::Features& features, const Tensor& labels, ModeKeys mode,
         est::ModelContext& ctx) {
        Tensor prediction = est::nn::dense(ctx, features.at("x"), {.units = 1});
        Tensor loss = est::nn::mean_squared_error(labels, prediction);
        est::summary::image(
            "rgb", Tensor::from_vector(std::vector<float>{0, 0.25f, 0.5f, 2, 1, 0}, {1, 1, 2, 3}),
            ctx);
        return est::EstimatorSpec(
            {.mode = mode, .loss = loss, .train_op = est::optim::sgd(0.1).minimize(loss, ctx)});
      },
      config);
  estimator.train(linear_input_fn(8, 8), {.steps = 1});
  std::vector<SummaryEvent> events = summaries_in(dir.str());
  // 255 / 2 per unit, truncated: 0, 31, 63, 255, 127, 0.
  CHECK(at(events, "rgb/image/0", 1).image_png ==
        est::encode_png({0, 31, 63, 255, 127, 0}, 1, 2, 3));
}

TEST_CASE("named tensors are fetched by LoggingTensorHook and SummarySaverHook by name") {
  TempDir dir;
  est::Estimator estimator(summarising_model_fn, quiet_config(dir.str()));
  LogCapture log;
  auto logging = std::make_shared<est::hooks::LoggingTensorHook>(
      est::hooks::LoggingTensorHook::Entries{{"pm", "head/prediction_mean:0"}}, 1);
  std::string custom_dir = dir / "custom";
  auto saver = std::make_shared<est::hooks::SummarySaverHook>(
      1, std::nullopt, custom_dir, std::vector<std::string>{"head/prediction_mean"});
  estimator.train(linear_input_fn(16, 8), {.hooks = {logging, saver}, .steps = 2});
  CHECK(log.count("pm = ") == 2);
  std::vector<SummaryEvent> events = summaries_in(custom_dir);
  CHECK(steps_with(events, "head/prediction_mean") == std::vector<int64_t>{1, 2});
  // An unknown name is a NotFoundError naming it and what can be fetched.
  auto bad = std::make_shared<est::hooks::LoggingTensorHook>(
      est::hooks::LoggingTensorHook::Entries{{"z", "head/nothing"}}, 1);
  CHECK_THROWS_WITH_AS(
      estimator.train(linear_input_fn(16, 8, false, -1), {.hooks = {bad}, .steps = 1}),
      doctest::Contains("head/prediction_mean"), est::NotFoundError);
}

TEST_CASE("evaluation writes its metrics to model_dir/eval, not model_fn's summaries") {
  TempDir dir;
  est::Estimator estimator(summarising_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(16, 8), {.steps = 2});
  est::Metrics metrics = estimator.evaluate(linear_input_fn(16, 8));
  std::vector<SummaryEvent> events = summaries_in(dir / "eval");
  CHECK(at(events, "mae", 2).scalar == doctest::Approx(metrics.at("mae")).epsilon(1e-6));
  CHECK(at(events, "loss", 2).scalar == doctest::Approx(metrics.at("loss")).epsilon(1e-6));
  CHECK(steps_with(events, "learning_rate").empty());
}

TEST_CASE("summary ops: clean_tag, shape checks, and outside an Estimator") {
  CHECK(est::summary::clean_tag("//a b/c:d.e-f") == "a_b/c_d.e-f");
  est::nn::VariableStore store;
  est::ModelContext plain(store);
  CHECK_THROWS_AS(est::summary::scalar("x", Tensor::scalar(1.0), plain),
                  est::FailedPreconditionError);
  CHECK_THROWS_AS(est::identity(Tensor::scalar(1.0), "x", plain), est::FailedPreconditionError);
  est::RunConfig config;
  est::Params params;
  est::EstimatorContext ctx(store, ModeKeys::kTrain, 0, params, config);
  CHECK_THROWS_AS(est::summary::scalar("x", Tensor::zeros({2}), ctx), est::InvalidArgumentError);
  CHECK_THROWS_AS(est::summary::image("x", Tensor::zeros({2, 2}), ctx), est::InvalidArgumentError);
  CHECK_THROWS_AS(est::summary::text("x", Tensor::zeros({}), ctx), est::InvalidArgumentError);
  CHECK(est::summary::scalar("x", Tensor::scalar(1.0), ctx) == "x");
  CHECK(est::summary::scalar("x", Tensor::scalar(1.0), ctx) == "x_1");
  CHECK(ctx.records().summaries.size() == 2);
}
