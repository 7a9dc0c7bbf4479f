// est-serve with serialized tf.Examples: a model exported with
// build_parsing_serving_input_receiver_fn answers TF Serving's :regress (its documentation's
// half_plus_three request and answer), :classify (scores equal to Estimator::predict's), and
// :predict with base64 ({"b64": ...}) serialized examples; malformed examples get 400 with a
// reason. Clients are curl (serve_harness.h).
#include <doctest/doctest.h>

#include <cmath>

#include "data/example.h"
#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;
namespace fs = std::filesystem;

std::string base64(const std::string& bytes) {
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t j = 0; j < 3; ++j)
      chunk = (chunk << 8) | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) text += j <= n ? alphabet[(chunk >> (18 - 6 * j)) & 63] : '=';
  }
  return text;
}

// y = 0.5 x + 3 (TF Serving's half_plus_three), x a float feature of tf.Examples, with TF's
// regress signature beside the default predict one.
ModelFn half_plus_three_fn() {
  return [](const Features& features, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    Tensor a = ctx.get_variable("a", {}, DType::kF32, nn::constant(0.5));
    Tensor b = ctx.get_variable("b", {}, DType::kF32, nn::constant(3.0));
    Tensor y = ops::add(ops::mul(features.at("x"), a), b);
    if (mode == ModeKeys::kPredict)
      return EstimatorSpec::predict({{"y", y}},
                                    {{"serving_default", PredictOutput{{{"y", y}}}},
                                     {"tensorflow/serving/regress", RegressionOutput{y}}});
    Tensor loss = nn::mean_squared_error(labels, y);
    return EstimatorSpec::train(loss, nn::optim::sgd(0.0).minimize(loss, ctx));
  };
}

data::FeatureSpecs x_spec() { return {{"x", data::FixedLenFeature{.shape = {}}}}; }

std::string export_half_plus_three(const testing::ScratchDir& dir) {
  Estimator estimator(half_plus_three_fn(), quiet(dir / "model"));
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  estimator.train(
      [&](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(Features{{"x", x}}, x).batch(2);
      },
      {.steps = 1});
  return estimator.export_saved_model(dir / "serving",
                                      build_parsing_serving_input_receiver_fn(x_spec()));
}

}  // namespace

TEST_CASE("est-serve: TF Serving's documented regress request, and predict with b64 examples") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_three(dir);
  Server server(dir / "serving", dir);
  const std::string model = "/v1/models/half_plus_two";

  // From TF Serving's REST API documentation (api_rest.md's example; TF Serving's
  // json_tensor.cc names the key "results").
  Reply regress = http(server, model + ":regress",
                       R"({"signature_name": "tensorflow/serving/regress", )"
                       R"("examples": [{"x": 1.0}, {"x": 2.0}]})",
                       &dir);
  CHECK(regress.status == 200);
  CHECK(regress.body == json::parse(R"({"results": [3.5, 4.0]})"));
  // A context feature reaches every example.
  Reply with_context = http(server, model + ":regress",
                            R"({"signature_name": "tensorflow/serving/regress", )"
                            R"("context": {"x": 4.0}, "examples": [{}, {}]})",
                            &dir);
  CHECK(with_context.body == json::parse(R"({"results": [5.0, 5.0]})"));

  // :predict on the default signature takes the serialized examples themselves.
  std::vector<float> one{1.0f}, five{5.0f};
  const std::string first = data::ExampleBuilder().add_floats("x", one).serialize();
  const std::string second = data::ExampleBuilder().add_floats("x", five).serialize();
  Reply predict = http(
      server, model + ":predict",
      json({{"instances", {{{"b64", base64(first)}}, {{"b64", base64(second)}}}}}).dump(), &dir);
  CHECK(predict.status == 200);
  CHECK(predict.body == json::parse(R"({"predictions": [3.5, 5.5]})"));
  Reply columnar =
      http(server, model + ":predict",
           json({{"inputs", {{"examples", {{{"b64", base64(second)}}}}}}}).dump(), &dir);
  CHECK(columnar.body == json::parse(R"({"outputs": [5.5]})"));

  Reply metadata = http(server, model + "/metadata");
  const json& signatures = metadata.body["metadata"]["signature_def"]["signature_def"];
  CHECK(signatures["serving_default"]["inputs"]["examples"]["dtype"] == "DT_STRING");
  CHECK(signatures["tensorflow/serving/regress"]["method_name"] == "tensorflow/serving/regress");
  CHECK(signatures["tensorflow/serving/regress"]["inputs"].contains("inputs"));

  // Malformed: 400 with a reason, never a crash.
  const std::vector<std::pair<std::string, std::string>> cases{
      {":regress", R"({"examples": [{"x": 1.0}]})"},  // serving_default is a predict signature
      {":classify", R"({"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1}]})"},
      {":regress", R"({"signature_name": "tensorflow/serving/regress", "examples": []})"},
      {":regress", R"({"signature_name": "tensorflow/serving/regress"})"},
      {":regress", R"({"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1}]})"},
      {":regress", R"({"signature_name": "tensorflow/serving/regress", "examples": [{"y": 1.0}]})"},
      {":regress",
       R"({"signature_name": "tensorflow/serving/regress", "examples": [{"x": [1.0, "a"]}]})"},
      {":regress", R"({"signature_name": "tensorflow/serving/regress", "examples": [[1.0]]})"},
      {":predict", R"({"instances": [{"b64": "not base64!"}]})"},
      {":predict", R"({"instances": [{"b64": "AAEC"}]})"},  // not an Example
      {":predict", R"({"instances": [1.0]})"},              // not a string
  };
  for (const auto& [verb, body] : cases) {
    CAPTURE(verb);
    CAPTURE(body);
    Reply reply = http(server, model + verb, body, &dir);
    CHECK(reply.status == 400);
    CHECK(reply.body.contains("error"));
  }
  CHECK(http(server, model + ":regress",
             R"({"signature_name": "tensorflow/serving/regress", "examples": [{"x": 2.0}]})", &dir)
            .status == 200);
}

TEST_CASE("est-serve: :classify answers label/score pairs equal to Estimator::predict's") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  Estimator estimator = train_classifier(
      [](const Tensor& logits) {
        Tensor probabilities = ops::softmax(logits);
        return EstimatorSpec::predict(
            {{"probabilities", probabilities}},
            {{"serving_default", ClassificationOutput{.scores = probabilities}},
             {"top", ClassificationOutput{.scores = ops::max(probabilities, {1}),
                                          .classes = ops::argmax(logits, 1)}}});
      },
      dir / "model");
  estimator.export_saved_model(dir / "serving", build_parsing_serving_input_receiver_fn(
                                                    {{"x", data::FixedLenFeature{.shape = {2}}}}));
  Server server(dir / "serving", dir);
  const std::string examples =
      R"({"examples": [{"x": [0.1, 0.7]}, {"x": [-0.3, 0.2]}, {"x": [0.9, -1.0]}, )"
      R"({"x": [0.5, 0.4]}]})";
  Reply reply = http(server, "/v1/models/half_plus_two:classify", examples, &dir);
  REQUIRE(reply.status == 200);
  auto expected = predict_classifier_rows(estimator);
  const json& results = reply.body["results"];
  REQUIRE(results.size() == expected.size());
  for (size_t row = 0; row < expected.size(); ++row) {
    std::vector<float> probabilities = expected[row].at("probabilities").to_vector<float>();
    REQUIRE(results[row].size() == 3);
    for (size_t k = 0; k < 3; ++k) {
      CHECK(results[row][k][0] == "");  // no classes in this signature: TF's empty label
      CHECK(results[row][k][1].get<double>() == doctest::Approx(probabilities[k]).epsilon(1e-5));
    }
  }
  // The "top" signature: the argmax as its decimal label, with its probability.
  Reply top = http(server, "/v1/models/half_plus_two:classify",
                   R"({"signature_name": "top", )" + examples.substr(1), &dir);
  REQUIRE(top.status == 200);
  for (size_t row = 0; row < expected.size(); ++row) {
    std::vector<float> probabilities = expected[row].at("probabilities").to_vector<float>();
    const auto best = std::max_element(probabilities.begin(), probabilities.end());
    REQUIRE(top.body["results"][row].size() == 1);
    CHECK(top.body["results"][row][0][0] == std::to_string(best - probabilities.begin()));
    CHECK(top.body["results"][row][0][1].get<double>() == doctest::Approx(*best).epsilon(1e-5));
  }
}
