// Estimator::export_saved_model: a small CNN trained a few steps is exported in TF's
// timestamped layout; the ONNX file passes onnx.checker and onnxruntime-node's predictions equal
// Estimator::predict's within 1e-5; the signatures name the inputs, outputs and method.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "estimator/estimator.h"
#include "nn/nn.h"
#include "tests/export/onnx_tools.h"

namespace {

using namespace est;
namespace fs = std::filesystem;

Tensor random_images(int64_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n * 8 * 8 * 1));
  for (float& v : values) v = uniform(generator);
  return Tensor::from_vector(values, {n, 8, 8, 1});
}

EstimatorSpec cnn_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                           ModelContext& ctx) {
  Tensor x = nn::conv2d(ctx, features.at("image"),
                        {.filters = 4, .kernel = 3, .padding = nn::same, .activation = nn::relu});
  x = nn::max_pooling2d(x, 2);
  x = nn::dense(ctx, ops::flatten(x), {.units = 8, .activation = nn::relu});
  Tensor logits = nn::dense(ctx, x, {.units = 3});
  if (mode == ModeKeys::kPredict)
    return EstimatorSpec::predict({{"logits", logits}, {"classes", ops::argmax(logits, 1)}},
                                  {{"probabilities", ops::softmax(logits)}});
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  return EstimatorSpec::train(loss, nn::optim::sgd(0.1).minimize(loss, ctx));
}

InputFn train_input_fn() {
  return [](ModeKeys, const InputContext*) {
    std::vector<int32_t> labels(32);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 3);
    return data::Dataset::from_tensor_slices(Features{{"image", random_images(32, 1)}},
                                             Tensor::from_vector(labels))
        .batch(8)
        .repeat();
  };
}

RunConfig quiet_config(const std::string& model_dir) {
  return {.model_dir = model_dir,
          .tf_random_seed = 3,
          .save_summary_steps = 0,
          .save_checkpoints_secs = std::nullopt,
          .log_step_count_steps = 1000};
}

}  // namespace

TEST_CASE("export_saved_model: TF's layout, signatures, and predictions equal to predict's") {
  testing::ScratchDir dir;
  Estimator estimator(cnn_model_fn, quiet_config(dir / "model"));
  estimator.train(train_input_fn(), {}, 4);
  auto receiver = build_raw_serving_input_receiver_fn({{"image", {{-1, 8, 8, 1}}}});
  const std::string exported = estimator.export_saved_model(dir / "export", receiver);

  CHECK(fs::path(exported).parent_path() == fs::path(dir / "export"));
  const std::string timestamp = fs::path(exported).filename().string();
  CHECK(timestamp.find_first_not_of("0123456789") == std::string::npos);
  CHECK(fs::is_directory(fs::path(exported) / "assets"));
  CHECK(fs::is_regular_file(fs::path(exported) / "model.onnx"));
  nlohmann::json signatures =
      nlohmann::json::parse(std::ifstream(fs::path(exported) / "signatures.json"));
  const nlohmann::json& serving = signatures["serving_default"];
  CHECK(serving["method_name"] == "tensorflow/serving/predict");
  CHECK(serving["inputs"]["image"]["tensor_shape"] == nlohmann::json({-1, 8, 8, 1}));
  CHECK(serving["inputs"]["image"]["dtype"] == "DT_FLOAT");
  CHECK(serving["outputs"]["logits"]["tensor_shape"] == nlohmann::json({-1, 3}));
  CHECK(serving["outputs"]["classes"]["dtype"] == "DT_INT64");
  CHECK(signatures["probabilities"]["outputs"]["output"]["name"] == "export_outputs/probabilities");

  // A second export the same second goes to the next timestamp, never over the first.
  const std::string second = estimator.export_saved_model(dir / "export", receiver);
  CHECK(second != exported);

  if (!testing::check_with_onnx_checker(fs::path(exported) / "model.onnx")) return;
  Tensor images = random_images(5, 99);
  nlohmann::json results;
  if (!testing::run_onnxruntime(fs::path(exported) / "model.onnx", {{"image", images}}, dir,
                                results))
    return;
  auto predictions = estimator.predict([&](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(Features{{"image", images}}).batch(5);
  });
  REQUIRE(predictions.size() == 5);
  std::vector<float> logits;
  std::vector<int64_t> classes;
  for (const Predictions& row : predictions) {
    for (float v : row.at("logits").to_vector<float>()) logits.push_back(v);
    classes.push_back(row.at("classes").to_vector<int64_t>()[0]);
  }
  testing::check_close(results["logits"], Tensor::from_vector(logits, {5, 3}));
  testing::check_close(results["classes"], Tensor::from_vector(classes));
  CHECK(results["export_outputs/probabilities"]["dims"] == nlohmann::json({5, 3}));
}

TEST_CASE("export_saved_model: no checkpoint is a NotFoundError") {
  testing::ScratchDir dir;
  Estimator estimator(cnn_model_fn, quiet_config(dir / "model"));
  auto receiver = build_raw_serving_input_receiver_fn({{"image", {{1, 8, 8, 1}}}});
  CHECK_THROWS_AS(estimator.export_saved_model(dir / "export", receiver), NotFoundError);
  CHECK_THROWS_AS(build_raw_serving_input_receiver_fn({{"image", {{}}}}), InvalidArgumentError);
}
