// Feature-column models at export: numeric and bucketized columns are ops (the bucket is a
// count of boundaries below the value, then one_hot), so their input layer is part of the ONNX
// graph, and onnxruntime-node and est's interpreter answer as Estimator::predict does, boundary
// values included. Columns computed on the host (indicator and embedding columns over
// categorical lookups) are refused at export by the column's name.
#include <doctest/doctest.h>

#include <filesystem>

#include "estimator/estimator.h"
#include "export/onnx_export.h"
#include "export/onnx_model.h"
#include "export/trace.h"
#include "feature_column/feature_column.h"
#include "nn/nn.h"
#include "tests/export/onnx_tools.h"

namespace {

using namespace est;
namespace fc = est::feature_column;
namespace fs = std::filesystem;

std::vector<fc::DenseColumnPtr> age_columns() {
  auto age = fc::numeric_column("age");
  return {age, fc::bucketized_column(age, {18, 25, 30.5, 65})};
}

EstimatorSpec age_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                           ModelContext& ctx) {
  Tensor inputs = fc::input_layer(features, age_columns(), ctx);  // [batch, 1 + 5]
  Tensor y = nn::dense(ctx, inputs, {.units = 2});
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"y", y}, {"inputs", inputs}});
  Tensor loss = nn::mean_squared_error(labels, y);
  return EstimatorSpec::train(loss, nn::optim::sgd(0.01).minimize(loss, ctx));
}

}  // namespace

TEST_CASE("export: numeric and bucketized columns export; onnxruntime answers as predict does") {
  testing::ScratchDir dir;
  Estimator estimator(age_model_fn, {.model_dir = dir / "model",
                                     .tf_random_seed = 5,
                                     .save_summary_steps = 0,
                                     .save_checkpoints_secs = std::nullopt,
                                     .log_step_count_steps = 1000});
  Tensor ages = Tensor::from_vector(std::vector<float>{20, 40, 70, 10}, {4, 1});
  Tensor targets = Tensor::from_vector(std::vector<float>{1, 0, 0, 1, 1, 1, 0, 0}, {4, 2});
  estimator.train(
      [&](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(Features{{"age", ages}}, targets).batch(2);
      },
      {}, 2);
  const std::string exported = estimator.export_saved_model(
      dir / "export", build_raw_serving_input_receiver_fn({{"age", {{-1, 1}}}}));
  const std::string model = fs::path(exported) / "model.onnx";

  // Boundary values fall in the bucket they open, as TF's bucketize puts them.
  Tensor probe = Tensor::from_vector(
      std::vector<float>{-3, 17.9f, 18, 24.99f, 25, 30.5f, 30.6f, 64.99f, 65, 90}, {10, 1});
  auto predictions = estimator.predict([&](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(Features{{"age", probe}}).batch(10);
  });
  REQUIRE(predictions.size() == 10);
  std::vector<float> y, inputs;
  for (const Predictions& row : predictions) {
    for (float v : row.at("y").to_vector<float>()) y.push_back(v);
    for (float v : row.at("inputs").to_vector<float>()) inputs.push_back(v);
  }
  const std::vector<int> buckets{0, 0, 1, 1, 2, 3, 3, 3, 4, 4};
  for (size_t row = 0; row < 10; ++row)
    for (int bucket = 0; bucket < 5; ++bucket)
      CHECK(inputs[row * 6 + 1 + static_cast<size_t>(bucket)] ==
            (bucket == buckets[row] ? 1.0f : 0.0f));

  // est's interpreter (what est-serve runs).
  serving::NamedTensors outputs = serving::OnnxModel::load(model).run({{"age", probe}});
  std::vector<float> interpreted = outputs.at("inputs").to_vector<float>();
  CHECK(interpreted == inputs);
  std::vector<float> interpreted_y = outputs.at("y").to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i)
    CHECK(interpreted_y[i] == doctest::Approx(y[i]).epsilon(1e-5));

  if (!testing::check_with_onnx_checker(model)) return;
  nlohmann::json results;
  if (!testing::run_onnxruntime(model, {{"age", probe}}, dir, results)) return;
  testing::check_close(results["y"], Tensor::from_vector(y, {10, 2}));
  testing::check_close(results["inputs"], Tensor::from_vector(inputs, {10, 6}));
}

TEST_CASE("export: indicator and embedding columns are refused with the column's name") {
  auto color = fc::categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"});
  auto export_columns = [](const std::vector<fc::DenseColumnPtr>& columns,
                           const serving::NamedTensors& first,
                           const serving::NamedTensors& second) {
    nn::VariableStore store;
    ModelContext ctx(store, nn::Mode::kPredict, 1);
    auto fn = [&](const serving::NamedTensors& features) {
      ctx.begin_call();
      return serving::NamedTensors{{"x", fc::input_layer(features, columns, ctx)}};
    };
    fn(first);  // creates the variables
    return serving::to_onnx(serving::trace(fn, first), serving::trace(fn, second), "g");
  };
  auto strings = [](std::vector<std::string> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return data::string_tensor(std::move(values), {n, 1});
  };
  const serving::NamedTensors two{{"color", strings({"red", "blue"})}};
  const serving::NamedTensors three{{"color", strings({"green", "red", "pink"})}};
  CHECK_THROWS_WITH_AS(export_columns({fc::indicator_column(color)}, two, three),
                       doctest::Contains("indicator_column 'color_indicator'"), UnimplementedError);
  CHECK_THROWS_WITH_AS(export_columns({fc::embedding_column(color, 2)}, two, three),
                       doctest::Contains("embedding_column 'color_embedding'"), UnimplementedError);
}
