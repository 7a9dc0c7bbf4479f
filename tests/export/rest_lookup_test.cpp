// est-serve over a feature-column model: a wide&deep classifier (wide_deep_model.h) exported
// with a raw receiver of string and integer features, its export moved elsewhere and its
// vocabulary file deleted (the asset serves), answers :predict with raw strings, in the row
// and the columnar format, as Estimator::predict does: logits within 1e-5, label_vocabulary's
// classes as strings. The requests name the "predict" signature: with a raw receiver TF's
// export drops the canned head's classification serving_default, so there is no default. A feature
// of the wrong kind is the client's error (400).
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/export/serve_harness.h"
#include "tests/export/wide_deep_model.h"

namespace {

using namespace est;
using namespace est::testing::serve;
namespace wd = est::testing::wide_deep;

}  // namespace

TEST_CASE("est-serve: raw string features go through the lookups and answer as predict does") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  auto classifier = wd::classifier(dir / "model", dir / "cities.txt");
  classifier.train(wd::training_input(), {.steps = 6});
  classifier.export_saved_model(dir / "export",
                                build_raw_serving_input_receiver_fn(wd::receiver_specs()));
  const std::vector<Predictions> predictions = classifier.predict(wd::probe_input());
  REQUIRE(predictions.size() == 5);
  fs::rename(dir / "export", dir / "moved");
  fs::remove(dir / "cities.txt");
  Server server(dir / "moved", dir);

  const Features probe = wd::probe_features();
  const auto ages = probe.at("age").to_vector<float>();
  const auto colors = probe.at("color").to_vector<std::string>();
  const auto cities = probe.at("city").to_vector<std::string>();
  const auto names = probe.at("name").to_vector<std::string>();
  const auto days = probe.at("day").to_vector<int64_t>();
  json instances = json::array();
  json columns = {{"age", json::array()},
                  {"color", json::array()},
                  {"city", json::array()},
                  {"name", json::array()},
                  {"day", json::array()}};
  for (size_t i = 0; i < ages.size(); ++i) {
    json row = {{"age", json::array({ages[i]})},
                {"color", json::array({colors[i]})},
                {"city", json::array({cities[i]})},
                {"name", json::array({names[i]})},
                {"day", json::array({days[i]})}};
    if (i == 0) row["name"] = json::array({json{{"b64", "emVk"}}});  // "zed" as bytes
    instances.push_back(row);
    for (const char* key : {"age", "color", "city", "name", "day"})
      columns[key].push_back(row[key]);
  }
  const Reply rows =
      http(server, "/v1/models/half_plus_two:predict",
           json{{"signature_name", "predict"}, {"instances", instances}}.dump(), &dir);
  INFO(rows.body.dump());
  REQUIRE(rows.status == 200);
  const Reply columnar =
      http(server, "/v1/models/half_plus_two:predict",
           json{{"signature_name", "predict"}, {"inputs", columns}}.dump(), &dir);
  INFO(columnar.body.dump());
  REQUIRE(columnar.status == 200);
  for (size_t i = 0; i < predictions.size(); ++i) {
    const float logit = predictions[i].at("logits").to_vector<float>().at(0);
    const std::string label = predictions[i].at("classes").to_vector<std::string>().at(0);
    const json& row = rows.body["predictions"][i];
    CHECK(row["logits"][0].get<double>() == doctest::Approx(logit).epsilon(1e-5));
    CHECK(row["classes"][0] == label);
    CHECK(row["all_classes"] == json({"no", "yes"}));
    CHECK(columnar.body["outputs"]["logits"][i][0].get<double>() ==
          doctest::Approx(logit).epsilon(1e-5));
    CHECK(columnar.body["outputs"]["classes"][i][0] == label);
    const auto probabilities = predictions[i].at("probabilities").to_vector<float>();
    for (size_t k = 0; k < 2; ++k)
      CHECK(row["probabilities"][k].get<double>() ==
            doctest::Approx(probabilities[k]).epsilon(1e-5));
  }

  // A string where the identity column reads integers: 400 with the reason.
  instances[0]["day"] = json::array({"monday"});
  const Reply wrong =
      http(server, "/v1/models/half_plus_two:predict",
           json{{"signature_name", "predict"}, {"instances", instances}}.dump(), &dir);
  CHECK(wrong.status == 400);
  CHECK(wrong.body["error"].get<std::string>().find("day") != std::string::npos);
}
