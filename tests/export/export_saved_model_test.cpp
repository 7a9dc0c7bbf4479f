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
  if (mode == ModeKeys::kPredict) {
    Predictions predictions{{"logits", logits}, {"classes", ops::argmax(logits, 1)}};
    return EstimatorSpec::predict(predictions, {{"serving_default", PredictOutput{predictions}},
                                                {"probabilities", ops::softmax(logits)}});
  }
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
  estimator.train(train_input_fn(), {.steps = 4});
  auto receiver = build_raw_serving_input_receiver_fn({{"image", {{-1, 8, 8, 1}}}});
  const std::string exported =
      estimator.export_saved_model(dir / "export", receiver, {}, /*as_text=*/true);

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
  CHECK(serving["outputs"]["logits"]["name"] == "export_outputs/serving_default/logits");
  CHECK(signatures["probabilities"]["outputs"]["output"]["name"] ==
        "export_outputs/probabilities/output");
  // as_text: the same model in protobuf's text format.
  std::ifstream text_file(fs::path(exported) / "model.pbtxt");
  const std::string text((std::istreambuf_iterator<char>(text_file)), {});
  CHECK(text.find("ir_version: 8") != std::string::npos);
  CHECK(text.find("op_type: \"Conv\"") != std::string::npos);
  CHECK(text.find("name: \"image\"") != std::string::npos);

  // A second export the same second goes to the next timestamp, never over the first; without
  // as_text there is no text form.
  const std::string second = estimator.export_saved_model(dir / "export", receiver);
  CHECK(second != exported);
  CHECK(!fs::exists(fs::path(second) / "model.pbtxt"));

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
  CHECK(results["export_outputs/probabilities/output"]["dims"] == nlohmann::json({5, 3}));
}

TEST_CASE("export_saved_model: no checkpoint is a NotFoundError") {
  testing::ScratchDir dir;
  Estimator estimator(cnn_model_fn, quiet_config(dir / "model"));
  auto receiver = build_raw_serving_input_receiver_fn({{"image", {{1, 8, 8, 1}}}});
  CHECK_THROWS_AS(estimator.export_saved_model(dir / "export", receiver), NotFoundError);
  CHECK_THROWS_AS(build_raw_serving_input_receiver_fn({{"image", {{}}}}), InvalidArgumentError);
}

namespace {

// y = 2 x, with a regression signature beside the predictions.
EstimatorSpec regression_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                                  ModelContext& ctx) {
  Tensor w = ctx.get_variable("w", {}, DType::kF32, nn::constant(2.0));
  Tensor y = ops::mul(features.at("x"), w);
  if (mode == ModeKeys::kPredict)
    return EstimatorSpec::predict({{"y", y}}, {{"serving_default", PredictOutput{{{"y", y}}}},
                                               {"regress", RegressionOutput{y}}});
  Tensor loss = nn::mean_squared_error(labels, y);
  return EstimatorSpec::train(loss, nn::optim::sgd(0.0).minimize(loss, ctx));
}

Estimator trained_regression(const std::string& model_dir) {
  Estimator estimator(regression_model_fn, quiet_config(model_dir));
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2});
  estimator.train(
      [x](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(Features{{"x", x}}, x).batch(2);
      },
      {.steps = 1});
  return estimator;
}

}  // namespace

TEST_CASE("export_saved_model: a parsing receiver exports its parse as a pre-processing step") {
  testing::ScratchDir dir;
  Estimator estimator = trained_regression(dir / "model");
  const data::FeatureSpecs spec{
      {"x", data::FixedLenFeature{.shape = {}, .default_value = std::vector<double>{0.5}}}};
  const std::string exported =
      estimator.export_saved_model(dir / "export", build_parsing_serving_input_receiver_fn(spec));
  nlohmann::json signatures =
      nlohmann::json::parse(std::ifstream(fs::path(exported) / "signatures.json"));
  const nlohmann::json& serving = signatures["serving_default"];
  CHECK(serving["inputs"]["examples"]["dtype"] == "DT_STRING");
  CHECK(serving["inputs"]["examples"]["tensor_shape"] == nlohmann::json({-1}));
  CHECK(serving["parse_example"]["input"] == "examples");
  CHECK(serving["parse_example"]["features"]["x"] ==
        nlohmann::json::parse(R"({"dtype": "DT_FLOAT", "shape": [], "default_value": [0.5]})"));
  // TF's regression signature: the examples under "inputs", the value under "outputs".
  const nlohmann::json& regress = signatures["regress"];
  CHECK(regress["method_name"] == "tensorflow/serving/regress");
  CHECK(regress["inputs"]["inputs"]["dtype"] == "DT_STRING");
  CHECK(regress["parse_example"]["input"] == "inputs");
  CHECK(regress["outputs"]["outputs"]["name"] == "export_outputs/regress/outputs");
  if (!testing::check_with_onnx_checker(fs::path(exported) / "model.onnx")) return;
  // The graph starts at the parsed feature.
  nlohmann::json results;
  if (!testing::run_onnxruntime(fs::path(exported) / "model.onnx",
                                {{"x", Tensor::from_vector(std::vector<float>{1, 3})}}, dir,
                                results))
    return;
  testing::check_close(results["y"], Tensor::from_vector(std::vector<float>{2, 6}));
}

TEST_CASE("export_saved_model: TF's signature rules for export_outputs and receivers") {
  testing::ScratchDir dir;
  Estimator estimator = trained_regression(dir / "model");
  // A raw receiver takes no tf.Examples: the regression signature is omitted, as TF omits it.
  const std::string exported = estimator.export_saved_model(
      dir / "export", build_raw_serving_input_receiver_fn({{"x", {{-1}}}}));
  nlohmann::json signatures =
      nlohmann::json::parse(std::ifstream(fs::path(exported) / "signatures.json"));
  CHECK(signatures.contains("serving_default"));
  CHECK(!signatures.contains("regress"));
  // A VarLenFeature has no dense graph input: refused, naming the feature.
  auto sparse = build_parsing_serving_input_receiver_fn({{"tags", data::VarLenFeature{}}});
  CHECK_THROWS_WITH_AS(estimator.export_saved_model(dir / "export", sparse),
                       doctest::Contains("'tags' is a VarLenFeature"), UnimplementedError);
  CHECK_THROWS_AS(build_parsing_serving_input_receiver_fn({}), InvalidArgumentError);
  // Several export_outputs, none of them serving_default: TF's error.
  Estimator several(
      [](const Features& features, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
        EstimatorSpec spec = regression_model_fn(features, labels, mode, ctx);
        if (mode == ModeKeys::kPredict) spec.export_outputs.erase("serving_default");
        if (mode == ModeKeys::kPredict)
          spec.export_outputs.emplace("other", spec.predictions.at("y"));
        return spec;
      },
      quiet_config(dir / "model"));
  CHECK_THROWS_WITH_AS(several.export_saved_model(
                           dir / "export2", build_raw_serving_input_receiver_fn({{"x", {{-1}}}})),
                       doctest::Contains("none of them is named serving_default"),
                       InvalidArgumentError);
  // ExportOutput's own checks.
  CHECK_THROWS_AS(ExportOutput(ClassificationOutput{}), InvalidArgumentError);
  CHECK_THROWS_AS(ExportOutput(RegressionOutput{Tensor::from_vector(std::vector<int64_t>{1})}),
                  InvalidArgumentError);
}
