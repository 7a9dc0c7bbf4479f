// Feature-column models at export: numeric and bucketized columns are ops (the bucket is a
// count of boundaries below the value, then one_hot), so their input layer is part of the ONNX
// graph, and onnxruntime-node and est's interpreter answer as Estimator::predict does, boundary
// values included. A string vocabulary list without OOV buckets is a LabelEncoder in the graph,
// an identity column with a default arithmetic there; the other categorical lookups
// (vocabulary file, OOV buckets, hash bucket, identity without a default) are
// pre-processing steps in signatures.json, their vocabulary files assets; the indicator,
// embedding and linear views over the ids are in the graph: a wide&deep classifier's export,
// moved elsewhere, answers as predict does, label_vocabulary's string classes included. What
// has no dense form (a weighted column) is still refused by the column's name.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "estimator/estimator.h"
#include "export/lookup_step.h"
#include "export/onnx_export.h"
#include "export/onnx_model.h"
#include "export/servable.h"
#include "export/trace.h"
#include "feature_column/feature_column.h"
#include "feature_column/hashing.h"
#include "nn/nn.h"
#include "tests/export/onnx_tools.h"
#include "tests/export/wide_deep_model.h"

namespace {

using namespace est;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), {}};
}
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
      {.steps = 2});
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

TEST_CASE("export: a wide&deep classifier's lookups run before its graph, as predict's do") {
  namespace wd = testing::wide_deep;
  testing::ScratchDir dir;
  auto classifier = wd::classifier(dir / "model", dir / "cities.txt");
  classifier.train(wd::training_input(), {.steps = 6});
  const fs::path exported = classifier.export_saved_model(
      dir / "export", build_raw_serving_input_receiver_fn(wd::receiver_specs()));
  const std::vector<Predictions> predictions = classifier.predict(wd::probe_input());
  REQUIRE(predictions.size() == 5);

  // The vocabulary file is an asset, named relative to the export; one step per lookup outside
  // the graph (the linear part and the DNN part share them); color's list is in the graph.
  CHECK(fs::is_regular_file(exported / "assets" / "cities.txt"));
  const nlohmann::json signatures =
      nlohmann::json::parse(std::ifstream(exported / "signatures.json"));
  std::map<std::string, nlohmann::json> steps;
  // A raw receiver: TF keeps only the head's "predict" signature (its classification
  // serving_default needs serialized tf.Examples).
  CHECK(!signatures.contains("serving_default"));
  for (const auto& step : signatures["predict"]["lookups"]) steps[step["input"]] = step;
  REQUIRE(steps.size() == 2);
  CHECK(signatures["predict"]["lookups"].size() == 2);
  CHECK(steps["city"]["vocabulary_file"] == "assets/cities.txt");
  CHECK(steps["city"]["num_oov_buckets"] == 1);
  CHECK(steps["name"]["kind"] == "hash_bucket");

  // Moved elsewhere, the export still loads (its asset included).
  const fs::path moved = dir / "moved";
  fs::rename(dir / "export", moved);
  const fs::path version = moved / exported.filename();
  const serving::Signatures loaded = serving::load_signatures(version / "signatures.json");
  const serving::OnnxModel model = serving::OnnxModel::load(version / "model.onnx");
  std::set<std::string> graph_inputs;
  for (const auto& info : model.inputs()) graph_inputs.insert(info.name);
  CHECK(graph_inputs == std::set<std::string>{"age", "city/ids", "color", "day", "name/ids"});
  const std::string text = serving::onnx_text(read_file(version / "model.onnx"));
  CHECK(text.find("op_type: \"LabelEncoder\"") != std::string::npos);
  CHECK(text.find("domain: \"ai.onnx.ml\"") != std::string::npos);

  // TF's ids: "berlin" not in the city file, in its OOV bucket (3 + hash % 1), "" ignored (-1).
  // (day, with -1 ignored and 9 out of range, is looked up in the graph.)
  const serving::NamedTensors ids =
      serving::run_lookups(loaded.at("predict").lookups, wd::probe_features(), model.inputs());
  CHECK(ids.at("city/ids").shape() == Shape{5, 1});
  CHECK(ids.at("city/ids").to_vector<int64_t>() == std::vector<int64_t>{2, 3, 0, -1, 1});
  std::vector<int64_t> names;
  for (const char* name : {"zed", "ann", "", "bob", "quinn"})
    names.push_back(*name ? static_cast<int64_t>(fc::fingerprint64(name) % 5) : -1);
  CHECK(ids.at("name/ids").to_vector<int64_t>() == names);

  std::vector<float> logits, probabilities;
  std::vector<std::string> classes;
  for (const Predictions& row : predictions) {
    logits.push_back(row.at("logits").to_vector<float>().at(0));
    for (float p : row.at("probabilities").to_vector<float>()) probabilities.push_back(p);
    classes.push_back(row.at("classes").to_vector<std::string>().at(0));
    const int64_t id = row.at("class_ids").to_vector<int64_t>().at(0);
    CHECK(classes.back() == (id == 0 ? "no" : "yes"));
  }
  const serving::NamedTensors outputs = model.run(ids);
  const std::vector<float> served = outputs.at("logits").to_vector<float>();
  REQUIRE(served.size() == logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    CHECK(served[i] == doctest::Approx(logits[i]).epsilon(1e-5));
  CHECK(outputs.at("classes").to_vector<std::string>() == classes);
  CHECK(outputs.at("all_classes").to_vector<std::string>() ==
        std::vector<std::string>{"no", "yes", "no", "yes", "no", "yes", "no", "yes", "no", "yes"});

  if (!testing::check_with_onnx_checker(version / "model.onnx")) return;
  serving::NamedTensors feeds;  // the graph's inputs only: the strings looked up before stay out
  for (const std::string& name : graph_inputs) feeds[name] = ids.at(name);
  nlohmann::json results;
  if (!testing::run_onnxruntime(version / "model.onnx", feeds, dir, results)) return;
  testing::check_close(results["logits"], Tensor::from_vector(logits, {5, 1}));
  testing::check_close(results["probabilities"], Tensor::from_vector(probabilities, {5, 2}));
  CHECK(results["classes"]["data"].get<std::vector<std::string>>() == classes);
}

namespace {

std::string export_input_layer(const std::vector<fc::DenseColumnPtr>& columns,
                               std::vector<serving::LookupStep>* steps) {
  auto strings = [](std::vector<std::string> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return data::string_tensor(std::move(values), {n, 1});
  };
  const serving::NamedTensors two{
      {"color", strings({"red", "blue"})},
      {"day", Tensor::from_vector(std::vector<int64_t>{1, 4}, {2, 1})},
      {"weight", Tensor::from_vector(std::vector<float>{1, 2}, {2, 1})}};
  const serving::NamedTensors three{
      {"color", strings({"green", "red", "pink"})},
      {"day", Tensor::from_vector(std::vector<int64_t>{0, 6, 2}, {3, 1})},
      {"weight", Tensor::from_vector(std::vector<float>{1, 2, 3}, {3, 1})}};
  nn::VariableStore store;
  ModelContext ctx(store, nn::Mode::kPredict, 1);
  auto fn = [&](const serving::NamedTensors& features) {
    ctx.begin_call();
    return serving::NamedTensors{{"x", fc::input_layer(features, columns, ctx)}};
  };
  fn(two);  // creates the variables
  return serving::to_onnx(serving::trace(fn, two), serving::trace(fn, three), "g", steps);
}

}  // namespace

TEST_CASE("export: a lookup outside the graph needs its step; a weighted column is refused") {
  auto color = fc::categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"});
  auto colors = fc::categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"}, {.num_oov_buckets = 2});
  // A vocabulary list without OOV buckets is in the graph: no step.
  std::vector<serving::LookupStep> steps;
  CHECK(export_input_layer({fc::indicator_column(color)}, nullptr).find("LabelEncoder") !=
        std::string::npos);
  // With OOV buckets (Fingerprint64), to_onnx alone has nowhere to write the lookup: refused,
  // naming the column.
  CHECK_THROWS_WITH_AS(export_input_layer({fc::indicator_column(colors)}, nullptr),
                       doctest::Contains("the lookup of 'color'"), UnimplementedError);
  // With a list for the steps: one step, shared by the indicator and the embedding.
  export_input_layer({fc::indicator_column(colors), fc::embedding_column(colors, 2)}, &steps);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].input == "color");
  CHECK(steps[0].output == "color/ids");
  CHECK(steps[0].table.string_keys == std::vector<std::string>{"red", "green", "blue"});
  CHECK(steps[0].table.num_oov_buckets == 2);
  // An identity column is arithmetic in the graph with a default, a step without one (an id
  // out of range must fail).
  steps.clear();
  export_input_layer({fc::indicator_column(fc::categorical_column_with_identity("day", 7, 0))},
                     &steps);
  CHECK(steps.empty());
  export_input_layer({fc::indicator_column(fc::categorical_column_with_identity("day", 7))},
                     &steps);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].output == "day/ids");
  CHECK(steps[0].table.kind == fc::LookupTable::Kind::kIdentity);
  CHECK_FALSE(steps[0].table.has_default);
  // A weighted column combines ids and weights on the host.
  auto weighted = fc::weighted_categorical_column(color, "weight");
  CHECK_THROWS_WITH_AS(export_input_layer({fc::indicator_column(weighted)}, &steps),
                       doctest::Contains("indicator_column 'color_weighted_by_weight_indicator'"),
                       UnimplementedError);
}
