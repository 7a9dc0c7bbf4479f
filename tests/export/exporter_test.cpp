// The exporters (tf.estimator's exporter.py): LatestExporter keeps the newest exports_to_keep,
// BestExporter exports when compare_fn (default: lower loss) says so and reads the best back
// from the evaluation's event files, FinalExporter exports only the final evaluation.
#include <doctest/doctest.h>

#include <filesystem>

#include "estimator/estimator.h"
#include "nn/nn.h"
#include "tests/command.h"

namespace {

using namespace est;
namespace fs = std::filesystem;

EstimatorSpec linear_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                              ModelContext& ctx) {
  Tensor y = nn::dense(ctx, features.at("x"), {.units = 1});
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"y", y}});
  Tensor loss = nn::mean_squared_error(labels, y);
  if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
  return EstimatorSpec::train(loss, nn::optim::sgd(0.1).minimize(loss, ctx));
}

InputFn input_fn() {
  return [](ModeKeys, const InputContext*) {
    Tensor x = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
    Tensor y = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4, 1});
    return data::Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(2);
  };
}

struct Trained {
  testing::ScratchDir dir;
  Estimator estimator{linear_model_fn, RunConfig{.model_dir = dir / "model",
                                                 .save_summary_steps = 0,
                                                 .save_checkpoints_secs = std::nullopt,
                                                 .log_step_count_steps = 1000}};
  std::string checkpoint;
  std::string export_path = dir / "model/export/x";
  Trained() {
    estimator.train(input_fn(), {.steps = 2});
    checkpoint = *estimator.latest_checkpoint();
  }
};

ServingInputReceiverFn receiver() {
  return build_raw_serving_input_receiver_fn({{"x", {{-1, 2}}}});
}

size_t count_exports(const std::string& path) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(path))
    if (fs::exists(entry.path() / "model.onnx")) ++n;
  return n;
}

}  // namespace

TEST_CASE("LatestExporter: exports every time and keeps the newest exports_to_keep") {
  Trained t;
  LatestExporter exporter("x", receiver(), {}, 2);
  std::vector<std::string> written;
  for (int i = 0; i < 3; ++i)
    written.push_back(*exporter.export_model(t.estimator, t.export_path, t.checkpoint, {}, false));
  CHECK(count_exports(t.export_path) == 2);
  CHECK(!fs::exists(written[0]));
  CHECK(fs::exists(fs::path(written[2]) / "signatures.json"));
  CHECK_THROWS_AS(LatestExporter("x", receiver(), {}, 0), InvalidArgumentError);
  CHECK_THROWS_AS(LatestExporter("x", nullptr), InvalidArgumentError);
  LatestExporter keep_all("x", receiver(), {}, std::nullopt);
  keep_all.export_model(t.estimator, t.export_path, t.checkpoint, {}, false);
  CHECK(count_exports(t.export_path) == 3);
}

TEST_CASE("BestExporter: lower loss by default, or compare_fn; an unknown best exports") {
  Trained t;
  BestExporter exporter("x", receiver(), "");  // no event files: the best starts unknown
  CHECK(exporter.export_model(t.estimator, t.export_path, t.checkpoint, {{"loss", 2.0}}, false));
  CHECK(!exporter.export_model(t.estimator, t.export_path, t.checkpoint, {{"loss", 3.0}}, false));
  CHECK(!exporter.export_model(t.estimator, t.export_path, t.checkpoint, {{"loss", 2.0}}, false));
  CHECK(exporter.export_model(t.estimator, t.export_path, t.checkpoint, {{"loss", 1.0}}, false));
  CHECK(count_exports(t.export_path) == 2);
  CHECK_THROWS_AS(
      exporter.export_model(t.estimator, t.export_path, t.checkpoint, {{"accuracy", 1.0}}, false),
      InvalidArgumentError);

  BestExporter by_accuracy("x", receiver(), "", [](const Metrics& best, const Metrics& current) {
    return current.at("accuracy") > best.at("accuracy");
  });
  CHECK(by_accuracy.export_model(t.estimator, t.export_path, t.checkpoint, {{"accuracy", 0.5}},
                                 false));
  CHECK(!by_accuracy.export_model(t.estimator, t.export_path, t.checkpoint, {{"accuracy", 0.4}},
                                  false));
  CHECK(by_accuracy.export_model(t.estimator, t.export_path, t.checkpoint, {{"accuracy", 0.6}},
                                 false));
  CHECK_THROWS_AS(BestExporter("x", receiver(), "", nullptr), InvalidArgumentError);
}

TEST_CASE("BestExporter: reads the best back from eval event files; exports the first once") {
  Trained t;
  Metrics first = t.estimator.evaluate(input_fn());
  // The best in the event files is this very evaluation: TF exports it (once).
  BestExporter exporter("x", receiver());
  CHECK(exporter.export_model(t.estimator, t.export_path, t.checkpoint, first, false));
  CHECK(!exporter.export_model(t.estimator, t.export_path, t.checkpoint, first, false));
  // A restarted job remembers a better evaluation from the event files.
  Metrics worse = first;
  worse["loss"] = first.at("loss") * 2 + 1;
  BestExporter restarted("x", receiver());
  restarted.export_model(t.estimator, t.export_path, t.checkpoint, first, false);  // first rule
  CHECK(!restarted.export_model(t.estimator, t.export_path, t.checkpoint, worse, false));
  BestExporter fresh("x", receiver());
  CHECK(!fresh.export_model(t.estimator, t.export_path, t.checkpoint, worse, false));
}

TEST_CASE("FinalExporter: only the final evaluation") {
  Trained t;
  FinalExporter exporter("x", receiver());
  CHECK(!exporter.export_model(t.estimator, t.export_path, t.checkpoint, {}, false));
  auto written = exporter.export_model(t.estimator, t.export_path, t.checkpoint, {}, true);
  REQUIRE(written);
  CHECK(fs::exists(fs::path(*written) / "model.onnx"));
}
