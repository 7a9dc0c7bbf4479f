// est-serve's versions as TF Serving changes them, asked over gRPC by tf_serving_client.py:
// requests in flight while a new version appears and the old one is unloaded by the version
// policy are all answered, each by one version; and a version label may only name a version
// that is loaded (model_servers/server_core.cc, UpdateModelVersionLabelMap), unless
// --allow_version_labels_for_unavailable_models: a config that breaks this is refused with
// TF Serving's FAILED_PRECONDITION and message at start, on a file poll (the last good config
// kept) and on HandleReloadConfigRequest. A version whose load failed is in the model's status
// over gRPC and REST as TF Serving reports it (state END, the load's error code and message;
// model_servers/get_model_status_impl.cc). Everything on 127.0.0.1 and free ports; waits are
// bounded; est-serve is stopped by its pid.
#include <doctest/doctest.h>

#include <future>

#include "tests/tools/grpc_serve_harness.h"

using namespace est::testing::grpc_serve;

TEST_CASE("est-serve gRPC: requests in flight during a version swap are all answered") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "versions");
  fs::create_directories(dir / "half_plus_two");
  fs::rename(dir / "versions/1", dir / "half_plus_two/1");
  write(dir / "models.config", config_text("  config { name: 'half_plus_two' base_path: '" +
                                           (dir / "half_plus_two") + "' }\n"));
  const int port = testing::free_port();
  Server server = start(dir, dir / "models.config", port);
  // 8 threads sending a batch of 200k values each, until version 2 (y = 0.5 x + 3) answers.
  json swap = predict_x("half_plus_two", {1.0f});  // one value fills the shape, as in TF
  swap["request"]["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] = 200000;
  const fs::path started = dir / "started";
  swap["repeat"] = {
      {"threads", 8}, {"until", 3.5}, {"output", "y"}, {"started_file", started.string()}};
  auto answers = std::async(std::launch::async, [&] { return call(dir, port, {swap}); });
  for (int i = 0; i < 600 && !fs::exists(started); ++i)  // at most 60 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(started));
  fs::rename(dir / "versions/2", dir / "half_plus_two/2");  // appears whole
  const json repeated = answers.get()[0].at("repeated");
  // Every answer is OK and all of it one version's: 2.5 (version 1) until 3.5 (version 2).
  INFO(repeated.dump());
  REQUIRE(repeated.size() > 8);
  CHECK(repeated.front() == json({2.5}));
  CHECK(repeated.back() == json({3.5}));
  for (const json& answer : repeated) CHECK((answer == json({2.5}) || answer == json({3.5})));
  // The policy (the newest version) unloaded version 1.
  CHECK(versions_of(call(dir, port, {status_of("half_plus_two")})[0]) == json({"2"}));
}

TEST_CASE("est-serve: a version label of a version not loaded is refused, as TF Serving does") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "half_plus_two");
  const std::string model = "  config { name: 'half_plus_two' base_path: '" +
                            (dir / "half_plus_two") + "'" +
                            " model_version_policy { specific { versions: 1 versions: 2 } }";
  const std::string refusal =
      "Request to assign label to version 1 of model half_plus_two, which is not currently "
      "available for inference";
  // At start nothing is loaded: a label stops the start, as it stops tensorflow_model_server.
  write(dir / "labelled.config",
        config_text(model + " version_labels { key: 'stable' value: 1 } }\n"));
  const std::string serve = std::string(EST_SERVE) + " --port " +
                            std::to_string(testing::free_port()) + " --model_config_file " +
                            testing::shell_quote(dir / "labelled.config");
  auto refused = testing::run_program(serve, 60);
  CHECK(refused.exit_code == 1);
  CHECK(refused.output.find(refusal) != std::string::npos);
  {  // With --allow_version_labels_for_unavailable_models the label is set before it loads.
    const int port = testing::free_port();
    Server allowed = start(dir, dir / "labelled.config", port,
                           {"--allow_version_labels_for_unavailable_models=true"});
    const auto answer =
        call(dir, port, {predict_x("half_plus_two", {1}, {{"version_label", "stable"}})});
    CHECK(floats(answer[0].at("response")["outputs"]["y"]) == std::vector<double>{2.5});
  }

  // Served without labels, then labelled once both versions serve; a later label of version 3
  // (not on disk) is refused on the file's poll and keeps the last good config.
  write(dir / "models.config", config_text(model + " }\n"));
  const int port = testing::free_port();
  Server server = start(dir, dir / "models.config", port);
  const std::string labelled = model + " version_labels { key: 'stable' value: 1 }";
  write(dir / "models.config", config_text(labelled + " }\n"));
  const json stable = predict_x("half_plus_two", {1}, {{"version_label", "stable"}});
  json answer = wait_for(dir, port, stable, [](const json& a) { return a.contains("response"); });
  CHECK(floats(answer.at("response")["outputs"]["y"]) == std::vector<double>{2.5});
  write(dir / "models.config",
        config_text(model + " version_labels { key: 'stable' value: 3 } }\n"));
  bool logged = false;
  for (int i = 0; i < 600 && !logged; ++i) {  // at most 60 s
    logged = server.log().find("Request to assign label to version 3") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(server.log());
  CHECK(logged);
  CHECK(server.log().find("serving the last good config") != std::string::npos);
  // HandleReloadConfigRequest is refused with TF Serving's status and message.
  json reload = {{"method", "HandleReloadConfigRequest"},
                 {"request",
                  {{"config",
                    {{"model_config_list",
                      {{"config",
                        {{{"name", "half_plus_two"},
                          {"base_path", dir / "half_plus_two"},
                          {"version_labels", {{"canary", 3}}}}}}}}}}}}};
  const auto answers = call(dir, port, {reload, stable});
  CHECK(answers[0].at("error")["code"] == "FAILED_PRECONDITION");
  CHECK(answers[0].at("error")["details"] ==
        "Request to assign label to version 3 of model half_plus_two, which is not currently "
        "available for inference");
  CHECK(floats(answers[1].at("response")["outputs"]["y"]) == std::vector<double>{2.5});
}

TEST_CASE("est-serve: a version that failed to load is END with its error in the model status") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two_versions(dir, dir / "half_plus_two");
  // Version 2's model does not parse; version 1 serves.
  std::ofstream(dir / "half_plus_two/2/model.onnx", std::ios::trunc) << "not a model";
  write(dir / "models.config",
        config_text("  config { name: 'half_plus_two' base_path: '" + (dir / "half_plus_two") +
                    "' model_version_policy { all {} } }\n"));
  const int port = testing::free_port();
  const int rest_port = testing::free_port();
  Server server =
      start(dir, dir / "models.config", port, {"--rest_api_port", std::to_string(rest_port)});
  const std::string message = "OnnxModel: " + (dir / "half_plus_two/2/model.onnx") +
                              " is not an ONNX model (no ModelProto parses)";
  json version_2 = status_of("half_plus_two");
  version_2["request"]["model_spec"]["version"] = "2";
  const auto answers = call(dir, port, {status_of("half_plus_two"), version_2});
  for (const json& answer : answers) INFO(answer.dump());
  const json failed = {{"version", "2"},
                       {"state", "END"},
                       {"status", {{"error_code", "DATA_LOSS"}, {"error_message", message}}}};
  CHECK(answers[0].at("response")["model_version_status"] ==
        json::array(
            {failed, {{"version", "1"}, {"state", "AVAILABLE"}, {"status", json::object()}}}));
  CHECK(answers[1].at("response")["model_version_status"] == json::array({failed}));
  // REST answers the same, its default fields written out as TF Serving's REST API writes them.
  auto rest = [&](const std::string& path) {
    auto result = testing::run_program(
        "curl -s -m 30 http://127.0.0.1:" + std::to_string(rest_port) + path, 60);
    INFO(result.output);
    return json::parse(result.output)["model_version_status"];
  };
  CHECK(rest("/v1/models/half_plus_two") ==
        json::array({failed,
                     {{"version", "1"},
                      {"state", "AVAILABLE"},
                      {"status", {{"error_code", "OK"}, {"error_message", ""}}}}}));
  CHECK(rest("/v1/models/half_plus_two/versions/2") == json::array({failed}));
  // Predict still says the version is not served.
  CHECK(call(dir, port, {predict_x("half_plus_two", {1}, {{"version", "2"}})})[0].at(
            "error")["code"] == "NOT_FOUND");
}
