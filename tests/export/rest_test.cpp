// est-serve from the outside: TF Serving's REST API asked by independent clients (curl, and
// python3's urllib for the load), on 127.0.0.1 and a free port (--rest_api_port, read back
// from its "Exporting HTTP/REST API at:" line). Models come from Estimator::export_saved_model:
// TF Serving's half_plus_two (its documentation's request and answer) and a small classifier
// whose answers must equal Estimator::predict's; HTTPS with a self-signed certificate made by
// openssl at test time. Every wait is bounded; the server is stopped by its pid.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;
namespace fs = std::filesystem;

}  // namespace

TEST_CASE("est-serve: TF Serving's documented half_plus_two request, and every endpoint") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  const std::string exported = export_half_plus_two(dir / "model", dir / "serving");
  const std::string version = fs::path(exported).filename().string();
  Server server(dir / "serving", dir);

  // From TF Serving's REST API documentation (api_rest.md).
  Reply doc =
      http(server, "/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0, 5.0]})", &dir);
  CHECK(doc.status == 200);
  CHECK(doc.body == json::parse(R"({"predictions": [2.5, 3.0, 4.5]})"));
  Reply columnar =
      http(server, "/v1/models/half_plus_two/versions/" + version + ":predict",
           R"({"signature_name": "serving_default", "inputs": [1.0, 2.0, 5.0]})", &dir);
  CHECK(columnar.status == 200);
  CHECK(columnar.body == json::parse(R"({"outputs": [2.5, 3.0, 4.5]})"));
  Reply named = http(server, "/v1/models/half_plus_two:predict",
                     R"({"instances": [{"x": 1.0}, {"x": 2.0}]})", &dir);
  CHECK(named.body == json::parse(R"({"predictions": [2.5, 3.0]})"));

  Reply status = http(server, "/v1/models/half_plus_two");
  CHECK(status.status == 200);
  CHECK(status.body["model_version_status"][0]["version"] == version);
  CHECK(status.body["model_version_status"][0]["state"] == "AVAILABLE");
  CHECK(http(server, "/v1/models/half_plus_two/versions/" + version).status == 200);
  Reply metadata = http(server, "/v1/models/half_plus_two/metadata");
  CHECK(metadata.status == 200);
  CHECK(metadata.body["model_spec"]["version"] == version);
  const json& signature =
      metadata.body["metadata"]["signature_def"]["signature_def"]["serving_default"];
  CHECK(signature["method_name"] == "tensorflow/serving/predict");
  CHECK(signature["inputs"]["x"]["dtype"] == "DT_FLOAT");
  CHECK(signature["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] == "-1");
  CHECK(signature["outputs"].contains("y"));

  // Unknown model, version and path: 404 with an error; a malformed path under /v1/: 400
  // (TF Serving's http_rest_api_handler.cc).
  for (const char* path :
       {"/v1/models/other", "/v1/models/half_plus_two/versions/1", "/v2/whatever"}) {
    CAPTURE(path);
    Reply reply = http(server, path);
    CHECK(reply.status == 404);
    CHECK(reply.body.contains("error"));
  }
  CHECK(http(server, "/v1/models/half_plus_two/versions/x").status == 400);
}

TEST_CASE("est-serve: malformed requests get 400 (or 413) with a reason, never a crash") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir, {"--max_request_bytes", "2000"});
  const std::string predict = "/v1/models/half_plus_two:predict";
  const std::vector<std::pair<std::string, int>> cases{
      {"{not json", 400},
      {"[1, 2]", 400},
      {R"({"instances": [[1.0, 2.0]]})", 400},                     // wrong shape
      {R"({"instances": ["one", "two"]})", 400},                   // wrong dtype
      {R"({"instances": [1.0, [2.0]]})", 400},                     // ragged
      {R"({"instances": [1.0], "inputs": [1.0]})", 400},           // both
      {R"({"signature_name": "nope", "instances": [1.0]})", 400},  // unknown signature
      {R"({"instances": []})", 400},
      {R"({"something": 1})", 400},
      {R"({"instances": [{"b64": "AAEC"}]})", 400},                    // not DT_STRING
      {R"({"instances": [)" + std::string(3000, ' ') + "1.0]}", 413},  // over the limit
  };
  for (const auto& [body, expected] : cases) {
    CAPTURE(body.substr(0, 60));
    Reply reply = http(server, predict, body, &dir);
    CHECK(reply.status == expected);
    CHECK(reply.body.contains("error"));
  }
  Reply classify =
      http(server, "/v1/models/half_plus_two:classify", R"({"examples": [{"x": 1.0}]})", &dir);
  CHECK(classify.status == 400);
  // Still serving after all that.
  CHECK(http(server, predict, R"({"instances": [1.0]})", &dir).status == 200);
}

TEST_CASE("est-serve: a classifier's answers equal Estimator::predict's") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  Estimator estimator = train_classifier(
      [](const Tensor& logits) {
        return EstimatorSpec::predict({{"logits", logits}, {"classes", ops::argmax(logits, 1)}});
      },
      dir / "model");
  estimator.export_saved_model(dir / "serving",
                               build_raw_serving_input_receiver_fn({{"x", {{-1, 2}}}}));
  Server server(dir / "serving", dir);
  Reply reply = http(server, "/v1/models/half_plus_two:predict",
                     R"({"instances": [[0.1, 0.7], [-0.3, 0.2], [0.9, -1.0], [0.5, 0.4]]})", &dir);
  REQUIRE(reply.status == 200);
  auto expected = predict_classifier_rows(estimator);
  REQUIRE(reply.body["predictions"].size() == expected.size());
  for (size_t row = 0; row < expected.size(); ++row) {
    const json& answer = reply.body["predictions"][row];
    CHECK(answer["classes"] == expected[row].at("classes").to_vector<int64_t>()[0]);
    std::vector<float> logits = expected[row].at("logits").to_vector<float>();
    for (size_t i = 0; i < logits.size(); ++i)
      CHECK(answer["logits"][i].get<double>() == doctest::Approx(logits[i]).epsilon(1e-5));
  }
}

TEST_CASE("est-serve: a new version is loaded under load without a failed request") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  const std::string first = export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  // Version 2 (a = 1, b = 3) is exported elsewhere, then moved in while clients send requests.
  const std::string next = export_half_plus_two(dir / "model2", dir / "staging", 1.0, 3.0);
  auto load = std::async(std::launch::async, [&] {
    return testing::run_program(
        "/usr/bin/python3 " +
            testing::shell_quote(std::string(EST_SOURCE_ROOT) + "/tests/export/rest_load.py") +
            " " + server.url("/v1/models/half_plus_two:predict") + " 4 4",
        60);
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t version = std::stoll(fs::path(first).filename().string()) + 1;
  fs::rename(next, fs::path(dir / "serving") / std::to_string(version));
  auto result = load.get();
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json summary = json::parse(result.output.substr(result.output.rfind('{')));
  CHECK(summary["failed"].empty());
  CHECK(summary["ok"].get<int>() > 0);
  // Both versions answered: 0.5 x + 2 before the move, x + 3 after.
  CHECK(summary["answers"] == json::array({"[2.5, 3.0, 4.5]", "[4.0, 5.0, 8.0]"}));
  CHECK(http(server, "/v1/models/half_plus_two").body["model_version_status"][0]["version"] ==
        std::to_string(version));
}

TEST_CASE("est-serve: with --enable_batching, concurrent requests still get their own answers") {
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir,
                {"--enable_batching", "--max_batch_size", "12", "--batch_timeout_micros", "20000"});
  auto result = testing::run_program(
      "/usr/bin/python3 " +
          testing::shell_quote(std::string(EST_SOURCE_ROOT) + "/tests/export/rest_load.py") + " " +
          server.url("/v1/models/half_plus_two:predict") + " 2 6",
      60);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json summary = json::parse(result.output.substr(result.output.rfind('{')));
  CHECK(summary["failed"].empty());
  CHECK(summary["ok"].get<int>() > 0);
  CHECK(summary["answers"] == json::array({"[2.5, 3.0, 4.5]"}));
}

TEST_CASE("est-serve: HTTPS with --ssl_cert_file and --ssl_key_file") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  if (testing::run_program("openssl version", 10).exit_code != 0)
    return est::testing::skip("openssl is not installed (apt-get install openssl)");
  testing::ScratchDir dir;
  // A self-signed certificate for 127.0.0.1, made now.
  const std::string cert = dir / "cert.pem", key = dir / "key.pem";
  auto made = testing::run_program(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
          testing::shell_quote(key) + " -out " + testing::shell_quote(cert) + " 2>&1",
      60);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir, {"--ssl_cert_file", cert, "--ssl_key_file", key});
  REQUIRE(server.url("").rfind("https://", 0) == 0);
  Reply doc =
      http(server, "/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0, 5.0]})", &dir);
  CHECK(doc.status == 200);
  CHECK(doc.body == json::parse(R"({"predictions": [2.5, 3.0, 4.5]})"));
  // Plain HTTP to the TLS port gets no answer; a client that does not trust the certificate
  // is refused by curl (exit 60).
  auto plain =
      testing::run_program("curl -s -m 10 http://127.0.0.1:" +
                               server.url("").substr(std::string("https://127.0.0.1:").size()) +
                               "/v1/models/half_plus_two",
                           30);
  CHECK(plain.output.find("model_version_status") == std::string::npos);
  auto untrusted =
      testing::run_program("curl -s -m 10 " + server.url("/v1/models/half_plus_two"), 30);
  CHECK(untrusted.exit_code == 60);
  // A key that does not exist: est-serve says so and exits.
  auto missing = testing::run_program(
      std::string(EST_SERVE) + " --model_base_path " + testing::shell_quote(dir / "serving") +
          " --port 0 --rest_api_port " + std::to_string(testing::free_port()) +
          " --ssl_cert_file " + testing::shell_quote(cert) +
          " --ssl_key_file /nonexistent/key.pem 2>&1",
      30);
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("TLS certificate or key") != std::string::npos);
}

TEST_CASE("est-serve: the listening socket's backlog is raised above cpp-httplib's 5") {
  // With a backlog of 5, clients connecting at once had their SYNs dropped and retried a second
  // later (bench/README.md, serving). ss shows a listening socket's backlog as its Send-Q.
  if (testing::run_program("ss -V", 10).exit_code != 0)
    return est::testing::skip("ss is not installed (apt-get install iproute2)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  auto listed =
      testing::run_program("ss -ltnH 'sport = :" + std::to_string(server.port()) + "'", 10);
  INFO(listed.output);
  REQUIRE(listed.exit_code == 0);
  std::istringstream fields(listed.output);
  std::string state;
  int64_t queued = -1, backlog = -1;
  fields >> state >> queued >> backlog;
  CHECK(state == "LISTEN");
  CHECK(backlog > 5);
}

TEST_CASE("est-serve: a kept-alive connection serves more than cpp-httplib's 5 requests") {
  // Debian's cpp-httplib closed a kept-alive connection after 5 requests, so every fifth request
  // paid a new connection (bench/README.md, serving). curl reuses one connection for the URLs of
  // one command line while the server keeps it open.
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  std::string command = "curl -sv -m 30 -o /dev/null";
  for (int i = 0; i < 12; ++i) command += " " + server.url("/v1/models/half_plus_two");
  auto result = testing::run_program(command + " 2>&1", 60);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  int reused = 0;
  for (size_t at = 0;
       (at = result.output.find("Re-using existing connection", at)) != std::string::npos; ++at)
    ++reused;
  CHECK(reused == 11);
  CHECK(result.output.find("Keep-Alive: timeout=5, max=100") != std::string::npos);
  CHECK(result.output.find("Connection: close") == std::string::npos);
}
