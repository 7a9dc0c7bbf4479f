// est-serve as tensorflow_model_server: TF Serving's gRPC API asked by a Python client whose
// stubs grpc_tools.protoc generates at test time from est-serve's .proto files
// (tf_serving_client.py), on two models of one --model_config_file exported by the Estimator:
// half_plus_two (versions 1 and 2, y = 0.5 x + 2 and + 3, raw tensors) and a small classifier
// taking serialized tf.Examples (classify and regress signatures). A changed config file is
// picked up without a restart (a model added, a version pinned, a label), one that does not
// parse keeps the last good config; bad requests get TF Serving's status codes and messages.
// Everything on 127.0.0.1 and free ports; waits are bounded; est-serve is stopped by its pid.
#include <doctest/doctest.h>

#include <sstream>

#include "tests/tools/grpc_client.h"

namespace {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;
namespace fs = std::filesystem;

// half_plus_two's versions 1 (b = 2) and 2 (b = 3) under `base`.
void export_half_plus_two_versions(const testing::ScratchDir& dir, const fs::path& base) {
  fs::create_directories(base);
  for (int version : {1, 2}) {
    const std::string tag = std::to_string(version);
    const std::string path =
        export_half_plus_two(dir / ("model" + tag), dir / ("staging" + tag), 0.5, 1.0 + version);
    fs::rename(path, base / tag);
  }
}

// The classifier of serve_harness.h, exported for tf.Examples ("x" [2]): serving_default
// classifies (softmax scores), "regress" regresses its top probability. Returns its
// predictions on classifier_rows().
std::vector<Predictions> export_classifier(const testing::ScratchDir& dir, const fs::path& base) {
  Estimator estimator = train_classifier(
      [](const Tensor& logits) {
        Tensor probabilities = ops::softmax(logits);
        Tensor top = ops::max(probabilities, {1});
        return EstimatorSpec::predict(
            {{"probabilities", probabilities}, {"top", top}},
            {{"serving_default", ClassificationOutput{.scores = probabilities}},
             {"regress", RegressionOutput{top}}});
      },
      dir / "classifier_model");
  estimator.export_saved_model(base.string(), build_parsing_serving_input_receiver_fn(
                                                  {{"x", data::FixedLenFeature{.shape = {2}}}}));
  return predict_classifier_rows(estimator);
}

json classifier_examples() {
  json examples = json::array();
  const std::vector<float> rows = classifier_rows().to_vector<float>();
  for (size_t i = 0; i < rows.size(); i += 2)
    examples.push_back(
        {{"features",
          {{"feature", {{"x", {{"float_list", {{"value", {rows[i], rows[i + 1]}}}}}}}}}}});
  return {{"example_list", {{"examples", examples}}}};
}

std::string config_text(const std::string& models) {
  return "model_config_list {\n" + models + "}\n";
}

Server start(const testing::ScratchDir& dir, const fs::path& config, int grpc_port,
             std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--model_config_file",
                                config.string(),
                                "--port",
                                std::to_string(grpc_port),
                                "--address",
                                "127.0.0.1",
                                "--file_system_poll_wait_seconds",
                                "0.2",
                                "--model_config_file_poll_wait_seconds",
                                "0.2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Server(dir, args, "Running gRPC ModelServer at 127.0.0.1:");
}

}  // namespace

TEST_CASE("est-serve gRPC: Predict, Classify, Regress, metadata and status of two models") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "half_plus_two");
  const std::vector<Predictions> expected = export_classifier(dir, dir / "classifier");
  // The classifier's base path is relative: to the config file's directory, as in TF Serving.
  write(dir / "models.config",
        config_text("  config { name: 'half_plus_two' base_path: '" + (dir / "half_plus_two") +
                    "' model_platform: 'tensorflow' model_version_policy { all {} } }\n"
                    "  config { name: 'classifier' base_path: 'classifier' }\n"));
  const int port = testing::free_port();
  const int rest_port = testing::free_port();
  Server server = start(dir, dir / "models.config", port,
                        {"--rest_api_port", std::to_string(rest_port), "--grpc_max_threads", "8",
                         "--flush_filesystem_caches=true", "--num_load_threads", "2"});
  // TF Serving's flags est-serve does not act on are named in a warning, not refused.
  CHECK(server.log().find("--flush_filesystem_caches is a tensorflow_model_server flag") !=
        std::string::npos);
  CHECK(server.log().find("--num_load_threads is a tensorflow_model_server flag") !=
        std::string::npos);

  json examples = classifier_examples();
  const auto answers =
      call(dir, port,
           {predict_x("half_plus_two", {1, 2, 5}),
            predict_x("half_plus_two", {1, 2, 5}, {{"version", "1"}}),
            status_of("half_plus_two"),
            status_of("classifier"),
            {{"method", "GetModelMetadata"},
             {"request",
              {{"model_spec", {{"name", "classifier"}}}, {"metadata_field", {"signature_def"}}}}},
            {{"method", "Classify"},
             {"request", {{"model_spec", {{"name", "classifier"}}}, {"input", examples}}}},
            {{"method", "Regress"},
             {"request",
              {{"model_spec", {{"name", "classifier"}, {"signature_name", "regress"}}},
               {"input", examples}}}},
            {{"method", "MultiInference"},
             {"request",
              {{"tasks",
                {{{"model_spec", {{"name", "classifier"}}},
                  {"method_name", "tensorflow/serving/classify"}},
                 {{"model_spec", {{"name", "classifier"}, {"signature_name", "regress"}}},
                  {"method_name", "tensorflow/serving/regress"}}}},
               {"input", examples}}}}});
  for (const json& answer : answers) INFO(answer.dump());
  // Predict: the newest version by default, or the one asked for; the answer names the model,
  // version and signature.
  const json& latest = answers[0].at("response");
  CHECK(floats(latest["outputs"]["y"]) == std::vector<double>{3.5, 4.0, 5.5});
  CHECK(latest["outputs"]["y"]["dtype"] == "DT_FLOAT");
  CHECK(latest["model_spec"] ==
        json({{"name", "half_plus_two"}, {"version", "2"}, {"signature_name", "serving_default"}}));
  CHECK(floats(answers[1].at("response")["outputs"]["y"]) == std::vector<double>{2.5, 3.0, 4.5});
  CHECK(answers[2].at("response")["model_version_status"] ==
        json::parse(R"([{"version": "2", "state": "AVAILABLE", "status": {}},
                        {"version": "1", "state": "AVAILABLE", "status": {}}])"));
  CHECK(answers[3].at("response")["model_version_status"][0]["state"] == "AVAILABLE");
  // GetModelMetadata: the SignatureDefMap in an Any, as TF Serving packs it.
  const json& signatures = answers[4].at("response")["metadata"]["signature_def"]["signature_def"];
  CHECK(signatures["serving_default"]["method_name"] == "tensorflow/serving/classify");
  CHECK(signatures["regress"]["method_name"] == "tensorflow/serving/regress");
  CHECK(signatures["regress"]["outputs"].contains("outputs"));
  // Classify and Regress equal Estimator::predict's probabilities and top probability.
  const json& classes = answers[5].at("response")["result"]["classifications"];
  const json& regressions = answers[6].at("response")["result"]["regressions"];
  REQUIRE(classes.size() == expected.size());
  REQUIRE(regressions.size() == expected.size());
  for (size_t row = 0; row < expected.size(); ++row) {
    const std::vector<float> p = expected[row].at("probabilities").to_vector<float>();
    REQUIRE(classes[row]["classes"].size() == 3);
    for (size_t k = 0; k < 3; ++k)
      CHECK(classes[row]["classes"][k]["score"].get<double>() ==
            doctest::Approx(p[k]).epsilon(1e-5));
    CHECK(regressions[row]["value"].get<double>() ==
          doctest::Approx(expected[row].at("top").to_vector<float>()[0]).epsilon(1e-5));
  }
  const json& multi = answers[7].at("response")["results"];
  REQUIRE(multi.size() == 2);
  CHECK(multi[0]["classification_result"] == answers[5]["response"]["result"]);
  CHECK(multi[1]["regression_result"] == answers[6]["response"]["result"]);
  // The REST API serves the same models.
  auto rest = testing::run_program(
      "curl -s -m 30 http://127.0.0.1:" + std::to_string(rest_port) + "/v1/models/classifier", 60);
  CHECK(rest.output.find("AVAILABLE") != std::string::npos);
}

TEST_CASE("est-serve gRPC: bad requests get TF Serving's status and a message") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "half_plus_two");
  write(dir / "models.config", config_text("  config { name: 'half_plus_two' base_path: '" +
                                           (dir / "half_plus_two") + "' }\n"));
  const int port = testing::free_port();
  Server server = start(dir, dir / "models.config", port);
  json short_content = predict_x("half_plus_two", {});
  short_content["request"]["inputs"]["x"].erase("float_val");
  short_content["request"]["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] = 4;
  short_content["float32_content"] = {{"x", {1.0, 2.0, 3.0}}};
  json two_gigabytes = predict_x("half_plus_two", {1});
  two_gigabytes["request"]["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] = 536870912;
  json huge_content = short_content;
  huge_content["request"]["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] = 536870912;
  json bad_filter = predict_x("half_plus_two", {1});
  bad_filter["request"]["output_filter"] = {"nope"};
  const auto answers = call(
      dir, port,
      {predict_x("no_such_model", {1}),
       predict_x("../half_plus_two", {1}),
       predict_x("half_plus_two", {1}, {{"version", "7"}}),
       predict_x("half_plus_two", {1}, {{"version_label", "canary"}}),
       short_content,
       two_gigabytes,
       huge_content,
       bad_filter,
       predict_x("half_plus_two", {1}, {{"signature_name", "nope"}}),
       // A request that is no PredictRequest (a length-delimited field running past the end).
       {{"raw_method", "/tensorflow.serving.PredictionService/Predict"}, {"raw_hex", "0aff01"}},
       status_of("../../etc"),
       {{"method", "Regress"}, {"request", json::object()}},
       predict_x("half_plus_two", {1})});
  auto error = [&](size_t i) {
    INFO(answers[i].dump());
    REQUIRE(answers[i].contains("error"));
    return answers[i]["error"];
  };
  CHECK(error(0)["code"] == "NOT_FOUND");
  CHECK(error(0)["details"] == "Servable not found for request: Latest(no_such_model)");
  CHECK(error(1)["code"] == "NOT_FOUND");
  CHECK(error(2)["code"] == "NOT_FOUND");
  CHECK(error(2)["details"] == "Servable not found for request: Specific(half_plus_two, 7)");
  CHECK(error(3)["code"] == "INVALID_ARGUMENT");
  CHECK(error(3)["details"] == "Unrecognized servable version label: canary");
  CHECK(error(4)["code"] == "INVALID_ARGUMENT");
  CHECK(error(4)["details"].get<std::string>().find(
            "tensor parsing error: x: tensor_content has 12 bytes; shape [4] of DT_FLOAT needs "
            "16") == 0);
  CHECK(error(5)["code"] == "INVALID_ARGUMENT");
  CHECK(error(5)["details"].get<std::string>().find("declares 536870912 elements but 1 values") !=
        std::string::npos);
  CHECK(error(6)["code"] == "INVALID_ARGUMENT");
  CHECK(error(6)["details"].get<std::string>().find("needs 2147483648") != std::string::npos);
  CHECK(error(7)["code"] == "INVALID_ARGUMENT");
  CHECK(error(7)["details"].get<std::string>().find(
            "output tensor alias not found in signature: nope") == 0);
  CHECK(error(8)["code"] == "FAILED_PRECONDITION");
  CHECK(error(8)["details"] == "Serving signature key \"nope\" not found.");
  // gRPC's own answer to an unparsable message (TF Serving's server is the same library).
  CHECK(error(9)["code"] == "INTERNAL");
  CHECK(error(10)["code"] == "NOT_FOUND");
  CHECK(error(10)["details"] == "Could not find any versions of model ../../etc");
  CHECK(error(11)["code"] == "INVALID_ARGUMENT");
  CHECK(error(11)["details"] == "Missing ModelSpec");
  // The server is still serving.
  CHECK(floats(answers[12].at("response")["outputs"]["y"]) == std::vector<double>{3.5});
}

namespace {

// `probe` asked every 200 ms until `done(answer)`, at most 60 s; the last answer.
json wait_for(const testing::ScratchDir& dir, int port, const json& probe,
              const std::function<bool(const json&)>& done) {
  json answer;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    answer = call(dir, port, {probe})[0];
    if (done(answer)) break;
  }
  return answer;
}

json versions_of(const json& status_answer) {
  json versions = json::array();
  if (status_answer.contains("response"))
    for (const json& status : status_answer["response"]["model_version_status"])
      versions.push_back(status["version"]);
  return versions;
}

}  // namespace

TEST_CASE("est-serve gRPC: a changed --model_config_file is applied without a restart") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "half_plus_two");
  export_classifier(dir, dir / "classifier");
  const std::string half_plus_two =
      "  config { name: 'half_plus_two' base_path: '" + (dir / "half_plus_two") + "'";
  write(dir / "models.config", config_text(half_plus_two + " }\n"));
  const int port = testing::free_port();
  Server server = start(dir, dir / "models.config", port);
  CHECK(versions_of(call(dir, port, {status_of("half_plus_two")})[0]) == json({"2"}));
  CHECK(call(dir, port, {status_of("classifier")})[0]["error"]["code"] == "NOT_FOUND");

  // A model added, half_plus_two pinned to version 1 with a label.
  write(dir / "models.config", config_text(half_plus_two +
                                           " model_version_policy { specific { versions: 1 } }"
                                           " version_labels { key: 'stable' value: 1 } }\n"
                                           "  config { name: 'classifier' base_path: '" +
                                           (dir / "classifier") + "' }\n"));
  json added = wait_for(dir, port, status_of("classifier"),
                        [](const json& answer) { return answer.contains("response"); });
  CHECK(added.contains("response"));
  json pinned = wait_for(dir, port, status_of("half_plus_two"),
                         [](const json& answer) { return versions_of(answer) == json({"1"}); });
  CHECK(versions_of(pinned) == json({"1"}));
  auto answers = call(dir, port,
                      {predict_x("half_plus_two", {1}),
                       predict_x("half_plus_two", {1}, {{"version_label", "stable"}})});
  CHECK(floats(answers[0].at("response")["outputs"]["y"]) == std::vector<double>{2.5});
  CHECK(floats(answers[1].at("response")["outputs"]["y"]) == std::vector<double>{2.5});

  // A file that does not parse: logged with where, and the last good config kept.
  write(dir / "models.config", "model_config_list { config { name: 'x' base_pth: '/' } }\n");
  bool logged = false;
  for (int i = 0; i < 600 && !logged; ++i) {  // at most 60 s
    logged = server.log().find("is not a ModelServerConfig") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(server.log());
  CHECK(logged);
  CHECK(server.log().find("line 1, column ") != std::string::npos);
  CHECK(server.log().find("no field named \"base_pth\"") != std::string::npos);
  CHECK(server.log().find("serving the last good config") != std::string::npos);
  answers = call(dir, port, {status_of("classifier"), predict_x("half_plus_two", {1})});
  CHECK(answers[0].contains("response"));
  CHECK(floats(answers[1].at("response")["outputs"]["y"]) == std::vector<double>{2.5});

  // ModelService.HandleReloadConfigRequest replaces the models too.
  json reload = {
      {"method", "HandleReloadConfigRequest"},
      {"request",
       {{"config",
         {{"model_config_list",
           {{"config", {{{"name", "half_plus_two"}, {"base_path", dir / "half_plus_two"}}}}}}}}}}};
  answers = call(dir, port, {reload, status_of("classifier"), status_of("half_plus_two")});
  CHECK(answers[0]["response"] == json({{"status", json::object()}}));
  CHECK(answers[1]["error"]["code"] == "NOT_FOUND");
  CHECK(versions_of(answers[2]) == json({"2"}));
}

TEST_CASE("est-serve: TF Serving's command line; a config that does not parse stops the start") {
  testing::ScratchDir dir;
  std::ofstream(dir / "bad.config") << "model_config_list {\n  config { name: 'x' }\n";
  const std::string serve = std::string(EST_SERVE) + " ";
  auto bad = testing::run_program(serve + "--model_config_file " +
                                      testing::shell_quote(dir / "bad.config") + " --port " +
                                      std::to_string(testing::free_port()),
                                  60);
  CHECK(bad.exit_code == 1);
  CHECK(
      bad.output.find("bad.config is not a ModelServerConfig in protobuf's text format: line 3") !=
      std::string::npos);
  // A flag TF Serving does not have either is a usage error, named.
  auto unknown = testing::run_program(
      serve + "--model_base_path " + testing::shell_quote(dir.str()) + " --nope=1", 60);
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.output.find("unknown argument --nope=1") != std::string::npos);
  auto nothing =
      testing::run_program(serve + "--model_base_path " + testing::shell_quote(dir.str()) +
                               " --port 0 --rest_api_port 0",
                           60);
  CHECK(nothing.exit_code == 2);
  CHECK(nothing.output.find("nothing to serve") != std::string::npos);
}
