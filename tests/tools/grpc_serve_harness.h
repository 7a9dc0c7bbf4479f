// The harness of the est-serve gRPC suites (serve_grpc_test.cpp, serve_grpc_swap_test.cpp, serve_ops_test.cpp):
// TF Serving's gRPC API asked by tf_serving_client.py (stubs generated at test time from
// est-serve's .proto files) on half_plus_two's versions and a classifier exported by the
// Estimator, est-serve started on 127.0.0.1 and free ports with a --model_config_file.
#pragma once

#include <doctest/doctest.h>

#include <sstream>

#include "tests/export/serve_harness.h"

namespace est::testing::grpc_serve {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;
namespace fs = std::filesystem;

// False, the running case skipped with the reason, when python3 lacks grpc_tools.
inline bool have_grpc_tools() {
  if (testing::run_program("/usr/bin/python3 -c 'import grpc, grpc_tools.protoc'", 30).exit_code ==
      0)
    return true;
  est::testing::skip("python3's grpc_tools is missing (apt-get install python3-grpc-tools)");
  return false;
}

// Each call's JSON answer ({"response": ...} or {"error": {"code", "details"}}).
inline std::vector<json> call(const testing::ScratchDir& dir, int port,
                              const std::vector<json>& calls) {
  std::string command = "/usr/bin/python3 " EST_SOURCE_ROOT "/tests/tools/tf_serving_client.py " +
                        testing::shell_quote(EST_SOURCE_ROOT "/export/grpc/proto") + " " +
                        testing::shell_quote(dir / "stubs") + " " + std::to_string(port);
  fs::create_directories(dir / "stubs");
  for (const json& c : calls) command += " " + testing::shell_quote(c.dump());
  auto result = testing::run_program(command, 120);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  std::vector<json> answers;
  std::istringstream lines(result.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') answers.push_back(json::parse(line));
  REQUIRE(answers.size() == calls.size());
  return answers;
}

inline json predict_x(const std::string& model, const std::vector<float>& x, json spec_extra = {}) {
  json spec = {{"name", model}};
  if (spec_extra.is_object()) spec.update(spec_extra);
  return {{"method", "Predict"},
          {"request",
           {{"model_spec", spec},
            {"inputs",
             {{"x",
               {{"dtype", "DT_FLOAT"},
                {"tensor_shape", {{"dim", json::array({{{"size", x.size()}}})}}},
                {"float_val", x}}}}}}}};
}

inline json status_of(const std::string& model) {
  return {{"method", "GetModelStatus"}, {"request", {{"model_spec", {{"name", model}}}}}};
}

inline std::vector<double> floats(const json& tensor) { return tensor.at("float_val"); }

// half_plus_two's versions 1 (b = 2) and 2 (b = 3) under `base`.
inline void export_half_plus_two_versions(const testing::ScratchDir& dir, const fs::path& base) {
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
inline std::vector<Predictions> export_classifier(const testing::ScratchDir& dir,
                                                  const fs::path& base) {
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

inline json classifier_examples() {
  json examples = json::array();
  const std::vector<float> rows = classifier_rows().to_vector<float>();
  for (size_t i = 0; i < rows.size(); i += 2)
    examples.push_back(
        {{"features",
          {{"feature", {{"x", {{"float_list", {{"value", {rows[i], rows[i + 1]}}}}}}}}}}});
  return {{"example_list", {{"examples", examples}}}};
}

inline std::string config_text(const std::string& models) {
  return "model_config_list {\n" + models + "}\n";
}

inline void write(const fs::path& path, const std::string& text) {
  const fs::path staging = path.string() + ".new";
  std::ofstream(staging) << text;
  fs::rename(staging, path);  // the server never reads half a file
}

inline Server start(const testing::ScratchDir& dir, const fs::path& config, int grpc_port,
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

// `probe` asked every 200 ms until `done(answer)`, at most 60 s; the last answer.
inline json wait_for(const testing::ScratchDir& dir, int port, const json& probe,
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

inline json versions_of(const json& status_answer) {
  json versions = json::array();
  if (status_answer.contains("response"))
    for (const json& status : status_answer["response"]["model_version_status"])
      versions.push_back(status["version"]);
  return versions;
}

}  // namespace est::testing::grpc_serve
