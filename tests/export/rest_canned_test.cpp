// The canned estimators' serving signatures (their heads' export_outputs, as
// tensorflow/estimator's head/binary_class_head.py, multi_class_head.py and regression_head.py
// return them) through est-serve: a DNNClassifier exported with a parsing receiver built from
// its feature columns answers TF Serving's :classify ({"results": [[["class", score], ...]]})
// with every class's name and probability equal to Estimator::predict's, a DNNRegressor answers
// :regress; with a raw receiver of several features only the "predict" signature is left (TF's
// export_lib drops the classify and regress signatures, serving_default among them), with one
// raw string tensor all are kept.
#include <doctest/doctest.h>

#include <filesystem>

#include "estimator/canned/dnn.h"
#include "feature_column/feature_column.h"
#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
namespace fc = est::feature_column;

const std::vector<float> kX1{0.5f, -1.0f, 1.5f, 0.2f}, kX2{-0.2f, 0.3f, 1.0f, -0.8f};

InputFn train_input(const Tensor& labels) {
  return [labels](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(
               Features{{"x1", Tensor::from_vector(kX1)}, {"x2", Tensor::from_vector(kX2)}}, labels)
        .batch(4);
  };
}

InputFn probe_input() {
  return [](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(
               Features{{"x1", Tensor::from_vector(kX1)}, {"x2", Tensor::from_vector(kX2)}})
        .batch(4);
  };
}

// TF Serving's examples of the probe rows.
std::string examples_body() {
  json examples = json::array();
  for (size_t i = 0; i < kX1.size(); ++i) examples.push_back({{"x1", kX1[i]}, {"x2", kX2[i]}});
  return json{{"examples", examples}}.dump();
}

std::vector<fc::DenseColumnPtr> columns() {
  return {fc::numeric_column("x1"), fc::numeric_column("x2")};
}

ServingInputReceiverFn parsing_receiver() {
  return build_parsing_serving_input_receiver_fn(
      fc::make_parse_example_spec({fc::numeric_column("x1"), fc::numeric_column("x2")}));
}

json read_signatures(const std::string& exported) {
  return json::parse(std::ifstream(fs::path(exported) / "signatures.json"));
}

}  // namespace

TEST_CASE("est-serve: a canned DNNClassifier answers :classify with its classes and scores") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  DNNClassifier classifier({.hidden_units = {4},
                            .feature_columns = columns(),
                            .n_classes = 3,
                            .config = quiet(dir / "model")});
  classifier.train(train_input(Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 1})),
                   {.steps = 10});
  const std::string exported = classifier.export_saved_model(dir / "serving", parsing_receiver());
  // TF's heads: serving_default and "classification" classify, "predict" predicts.
  const json signatures = read_signatures(exported);
  CHECK(signatures["serving_default"]["method_name"] == "tensorflow/serving/classify");
  CHECK(signatures["classification"]["method_name"] == "tensorflow/serving/classify");
  CHECK(signatures["predict"]["method_name"] == "tensorflow/serving/predict");
  CHECK(signatures["serving_default"]["outputs"]["classes"]["dtype"] == "DT_STRING");
  CHECK(signatures["serving_default"]["outputs"]["scores"]["dtype"] == "DT_FLOAT");
  CHECK(!signatures.contains("regression"));  // the multi-class head has none

  const std::vector<Predictions> expected = classifier.predict(probe_input());
  REQUIRE(expected.size() == kX1.size());
  Server server(dir / "serving", dir);
  for (const char* signature : {"", "classification"}) {
    CAPTURE(signature);
    json request = json::parse(examples_body());
    if (*signature) request["signature_name"] = signature;
    const Reply reply = http(server, "/v1/models/half_plus_two:classify", request.dump(), &dir);
    INFO(reply.body.dump());
    REQUIRE(reply.status == 200);
    const json& results = reply.body["results"];
    REQUIRE(results.size() == expected.size());
    for (size_t row = 0; row < expected.size(); ++row) {
      const auto probabilities = expected[row].at("probabilities").to_vector<float>();
      REQUIRE(results[row].size() == 3);
      for (size_t k = 0; k < 3; ++k) {
        CHECK(results[row][k][0] == std::to_string(k));  // TF's as_string of the class ids
        CHECK(results[row][k][1].get<double>() == doctest::Approx(probabilities[k]).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("est-serve: a label_vocabulary classifier classifies with its strings") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  DNNClassifier classifier({.hidden_units = {4},
                            .feature_columns = columns(),
                            .label_vocabulary = {"no", "yes"},
                            .config = quiet(dir / "model")});
  classifier.train(train_input(data::string_tensor({"no", "yes", "yes", "no"}, {4})),
                   {.steps = 10});
  const std::string exported = classifier.export_saved_model(dir / "serving", parsing_receiver());
  // The binary head's "regression" signature: the logistic.
  const json signatures = read_signatures(exported);
  CHECK(signatures["regression"]["method_name"] == "tensorflow/serving/regress");

  const std::vector<Predictions> expected = classifier.predict(probe_input());
  REQUIRE(expected.size() == kX1.size());
  Server server(dir / "serving", dir);
  const Reply reply = http(server, "/v1/models/half_plus_two:classify", examples_body(), &dir);
  INFO(reply.body.dump());
  REQUIRE(reply.status == 200);
  json regress_request = json::parse(examples_body());
  regress_request["signature_name"] = "regression";
  const Reply regress =
      http(server, "/v1/models/half_plus_two:regress", regress_request.dump(), &dir);
  INFO(regress.body.dump());
  REQUIRE(regress.status == 200);
  for (size_t row = 0; row < expected.size(); ++row) {
    const auto probabilities = expected[row].at("probabilities").to_vector<float>();
    const json& pairs = reply.body["results"][row];
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0][0] == "no");
    CHECK(pairs[1][0] == "yes");
    CHECK(pairs[0][1].get<double>() == doctest::Approx(probabilities[0]).epsilon(1e-5));
    CHECK(pairs[1][1].get<double>() == doctest::Approx(probabilities[1]).epsilon(1e-5));
    CHECK(regress.body["results"][row].get<double>() ==
          doctest::Approx(expected[row].at("logistic").to_vector<float>().at(0)).epsilon(1e-5));
  }
}

TEST_CASE("est-serve: a canned DNNRegressor answers :regress as predict does") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  DNNRegressor regressor(
      {.hidden_units = {4}, .feature_columns = columns(), .config = quiet(dir / "model")});
  regressor.train(train_input(Tensor::from_vector(std::vector<float>{1.0f, -0.5f, 2.0f, 0.3f})),
                  {.steps = 10});
  const std::string exported = regressor.export_saved_model(dir / "serving", parsing_receiver());
  const json signatures = read_signatures(exported);
  CHECK(signatures["serving_default"]["method_name"] == "tensorflow/serving/regress");
  CHECK(signatures["regression"]["method_name"] == "tensorflow/serving/regress");
  CHECK(signatures["predict"]["method_name"] == "tensorflow/serving/predict");

  const std::vector<Predictions> expected = regressor.predict(probe_input());
  REQUIRE(expected.size() == kX1.size());
  Server server(dir / "serving", dir);
  const Reply reply = http(server, "/v1/models/half_plus_two:regress", examples_body(), &dir);
  INFO(reply.body.dump());
  REQUIRE(reply.status == 200);
  REQUIRE(reply.body["results"].size() == expected.size());
  for (size_t row = 0; row < expected.size(); ++row)
    CHECK(reply.body["results"][row].get<double>() ==
          doctest::Approx(expected[row].at("predictions").to_vector<float>().at(0)).epsilon(1e-5));
  // serving_default regresses: :classify on it is TF Serving's error.
  const Reply wrong = http(server, "/v1/models/half_plus_two:classify", examples_body(), &dir);
  CHECK(wrong.status == 400);
}

TEST_CASE("export: a raw receiver keeps only the canned heads' predict signature, as TF") {
  testing::ScratchDir dir;
  for (int64_t n_classes : {2, 3}) {
    CAPTURE(n_classes);
    DNNClassifier classifier({.hidden_units = {4},
                              .feature_columns = columns(),
                              .n_classes = n_classes,
                              .config = quiet(dir / ("model" + std::to_string(n_classes)))});
    classifier.train(train_input(Tensor::from_vector(std::vector<int32_t>{0, 1, 1, 0})),
                     {.steps = 2});
    const std::string exported = classifier.export_saved_model(
        dir / "export", build_raw_serving_input_receiver_fn({{"x1", {{-1}}}, {"x2", {{-1}}}}));
    // classification, regression and serving_default (a classification) need one string input.
    const json signatures = read_signatures(exported);
    std::vector<std::string> names;
    for (const auto& item : signatures.items()) names.push_back(item.key());
    CHECK(names == std::vector<std::string>{"predict"});
    CHECK(signatures["predict"]["inputs"].contains("x1"));
    CHECK(signatures["predict"]["outputs"].contains("probabilities"));
  }
  // A raw receiver of one string tensor passes TF's check (ClassificationOutput's
  // as_signature_def asks only for one string input): every signature is kept, the classify ones
  // with that tensor under "inputs" and no parse step (TF feeds it the serialized examples).
  auto color = fc::categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"});
  DNNClassifier by_color({.hidden_units = {2},
                          .feature_columns = {fc::indicator_column(color)},
                          .config = quiet(dir / "model_color")});
  by_color.train(
      [](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(
                   Features{{"color", data::string_tensor({"red", "blue", "green", "red"}, {4})}},
                   Tensor::from_vector(std::vector<int32_t>{0, 1, 1, 0}))
            .batch(4);
      },
      {.steps = 2});
  const json kept = read_signatures(by_color.export_saved_model(
      dir / "export_color",
      build_raw_serving_input_receiver_fn({{"color", {{-1}, DType::kString}}})));
  std::vector<std::string> names;
  for (const auto& item : kept.items()) names.push_back(item.key());
  CHECK(names ==
        std::vector<std::string>{"classification", "predict", "regression", "serving_default"});
  CHECK(kept["serving_default"]["inputs"]["inputs"]["name"] == "color");
  CHECK(!kept["serving_default"].contains("parse_example"));
  CHECK(kept["predict"]["inputs"].contains("color"));
}
