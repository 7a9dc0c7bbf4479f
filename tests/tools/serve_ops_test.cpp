// est-serve's operational flags as tensorflow_model_server's: --monitoring_config_file (TF
// Serving's metrics on the REST port, scraped by Debian's real Prometheus and queried through
// its HTTP API; REST and gRPC requests counted), --batching_parameters_file (the batcher's
// options; a bad file refused at startup naming the field; enable_large_batch_splitting answers
// a request larger than a batch in parts), --enable_model_warmup (the
// TFRecord of PredictionLogs a Python script writes with protoc's classes, run before the
// version is served; a corrupt file fails that version's load), --file_system_poll_wait_seconds
// 0 (versions loaded once), --rest_api_num_threads (connections served at once) and
// --grpc_max_threads (gRPC's thread quota). On 127.0.0.1
// and free ports; every wait is bounded; est-serve and Prometheus are stopped by their pids.
#include <doctest/doctest.h>

#include "tests/process_group.h"
#include "tests/tools/grpc_serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::grpc_serve;
namespace fs = std::filesystem;

const char* const kMetricsPath = "/monitoring/prometheus/metrics";

// A monitoring config enabling Prometheus's page at kMetricsPath.
std::string monitoring_config(const testing::ScratchDir& dir) {
  const fs::path path = dir / "monitoring.config";
  write(path,
        std::string("prometheus_config {\n  enable: true,\n  path: \"") + kMetricsPath + "\"\n}\n");
  return path.string();
}

std::string scrape(const Server& server) {
  const Reply reply = http(server, kMetricsPath);
  REQUIRE(reply.status == 200);
  return reply.text;
}

// The value on the line of `series` (name and labels as written) on the page, or -1.
double sample(const std::string& page, const std::string& series) {
  const auto at = page.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(page.substr(at + series.size() + 2));
}

json predict_body(const std::vector<float>& x) { return {{"instances", x}}; }

// est-serve's stderr and exit status when started with `args` (expected to stop at once).
testing::ProgramResult start_failing(const std::vector<std::string>& args) {
  std::string command = EST_SERVE;
  for (const std::string& arg : args) command += " " + testing::shell_quote(arg);
  return testing::run_program(command + " 2>&1", 60);
}

// python3 write_warmup.py: the warmup file of `records` under `version_dir`.
void write_warmup(const testing::ScratchDir& dir, const fs::path& version_dir,
                  const std::vector<json>& records) {
  std::string command =
      "/usr/bin/python3 " EST_SOURCE_ROOT "/tests/tools/write_warmup.py " +
      testing::shell_quote(EST_SOURCE_ROOT "/export/grpc/proto") + " " +
      testing::shell_quote(dir / "stubs") + " " +
      testing::shell_quote(version_dir / "assets.extra" / "tf_serving_warmup_requests");
  fs::create_directories(dir / "stubs");
  for (const json& record : records) command += " " + testing::shell_quote(record.dump());
  auto result = testing::run_program(command, 120);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
}

// est-serve on dir/base with --batching_parameters_file of `text` stops at startup (status 1),
// its message naming the file and `named`.
void refused_batching(const testing::ScratchDir& dir, const std::string& text,
                      const std::string& named) {
  write(dir / "batching.config", text);
  const auto result =
      start_failing({"--model_base_path", dir / "base", "--port", "0", "--rest_api_port",
                     std::to_string(testing::free_port()), "--enable_batching",
                     "--batching_parameters_file", dir / "batching.config"});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK(result.output.find(named) != std::string::npos);
  CHECK(result.output.find("batching.config") != std::string::npos);
}

// Another est-serve on dir/base, after one that ran there (whose log, and port, it must not
// read).
Server restart(const testing::ScratchDir& dir, const std::vector<std::string>& extra) {
  fs::remove(dir / "server.log");
  return Server(dir / "base", dir, extra);
}

}  // namespace

TEST_CASE("est-serve metrics: TF Serving's names on the REST port, scraped by Prometheus") {
  if (!have_curl()) return;
  if (!fs::exists("/usr/bin/prometheus")) {
    testing::skip("Debian's prometheus is missing (apt-get install prometheus)");
    return;
  }
  testing::ScratchDir dir;
  const std::string version = export_half_plus_two(dir / "model", dir / "base");
  Server server(dir / "base", dir, {"--monitoring_config_file", monitoring_config(dir)});
  for (float x : {1.0f, 2.0f, 3.0f})
    CHECK(http(server, "/v1/models/half_plus_two:predict", predict_body({x}).dump(), &dir).status ==
          200);
  CHECK(http(server, "/v1/models/half_plus_two/versions/9:predict", predict_body({1}).dump(), &dir)
            .status == 404);
  CHECK(http(server, "/v1/models/half_plus_two").status == 200);
  const std::string page = scrape(server);
  INFO(page);
  CHECK(page.find("# TYPE :tensorflow:serving:request_count counter\n") != std::string::npos);
  CHECK(sample(page,
               ":tensorflow:serving:request_count{model_name=\"half_plus_two\",status=\"OK\"}") ==
        4);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:request_count{model_name=\"half_plus_two\",status=\"NOT_FOUND\"}") ==
      1);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:request_latency_count{model_name=\"half_plus_two\",API=\"predict\","
          "entrypoint=\"REST\"}") == 3);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:runtime_latency_count{model_name=\"half_plus_two\",API=\"Predict\","
          "runtime=\"est\"}") == 3);
  CHECK(sample(page, ":tensorflow:cc:saved_model:load_attempt_count{model_path=\"" + version +
                         "\",status=\"success\"}") == 1);

  // Prometheus itself scrapes the page every second; its HTTP API answers the count.
  const int prometheus_port = testing::free_port();
  write(dir / "prometheus.yml",
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: est-serve\n"
        "    metrics_path: " +
            std::string(kMetricsPath) + "\n    static_configs:\n      - targets: ['127.0.0.1:" +
            std::to_string(server.port()) + "']\n");
  testing::ProcessGroup processes(dir.str());
  const size_t prometheus =
      processes.start({"/usr/bin/prometheus", "--config.file=" + dir / "prometheus.yml",
                       "--storage.tsdb.path=" + dir / "tsdb",
                       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port)});
  const std::string query =
      "curl -s -m 5 -G --data-urlencode "
      "'query={__name__=\":tensorflow:serving:request_count\",model_name=\"half_plus_two\","
      "status=\"OK\"}' http://127.0.0.1:" +
      std::to_string(prometheus_port) + "/api/v1/query";
  json answer;
  for (int i = 0; i < 120; ++i) {  // at most about 60 s
    REQUIRE_FALSE(processes.wait(prometheus, std::chrono::milliseconds(0)).has_value());
    auto result = testing::run_program(query, 30);
    answer = json::parse(result.output, nullptr, false);
    if (answer.is_object() && answer.value("status", "") == "success" &&
        !answer["data"]["result"].empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  INFO(answer.dump());
  REQUIRE(answer.is_object());
  REQUIRE(!answer["data"]["result"].empty());
  const json& series = answer["data"]["result"][0];
  CHECK(series["metric"]["job"] == "est-serve");
  CHECK(series["value"][1] == "4");  // the value as Prometheus's API writes it: a string
}

TEST_CASE("est-serve metrics: gRPC's Predict counted with its API and entrypoint") {
  if (!have_curl() || !have_grpc_tools()) return;
  testing::ScratchDir dir;
  const std::string version = export_half_plus_two(dir / "model", dir / "base");
  // A config that does not parse stops the server at startup, naming the file and the line.
  write(dir / "bad_monitoring.config", "prometheus_config { enable: yes please }\n");
  const auto bad = start_failing({"--model_base_path", dir / "base", "--port", "0",
                                  "--rest_api_port", std::to_string(testing::free_port()),
                                  "--monitoring_config_file", dir / "bad_monitoring.config"});
  INFO(bad.output);
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("bad_monitoring.config is not a MonitoringConfig in protobuf's text "
                        "format: line 1") != std::string::npos);
  const int port = testing::free_port();
  Server server(
      dir / "base", dir,
      {"--monitoring_config_file", monitoring_config(dir), "--port", std::to_string(port)});
  const auto answers = call(dir, port,
                            {predict_x("half_plus_two", {1, 2}), predict_x("half_plus_two", {3}),
                             predict_x("no_such_model", {1})});
  CHECK(answers[0].contains("response"));
  CHECK(answers[2]["error"]["code"] == "NOT_FOUND");
  const std::string page = scrape(server);
  INFO(page);
  CHECK(sample(page,
               ":tensorflow:serving:request_count{model_name=\"half_plus_two\",status=\"OK\"}") ==
        2);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:request_count{model_name=\"no_such_model\",status=\"NOT_FOUND\"}") ==
      1);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:request_latency_count{model_name=\"half_plus_two\",API=\"Predict\","
          "entrypoint=\"GRPC\"}") == 2);
}

TEST_CASE("est-serve --batching_parameters_file: TF Serving's BatchingParameters drive batching") {
  if (!have_curl()) return;
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "base");
  refused_batching(dir, "max_batch_size { value: 0 }\n",
                   "BatchingParameters.max_batch_size must be positive");
  refused_batching(dir, "max_batch_size { value: 4 }\nallowed_batch_sizes: 2\n",
                   "BatchingParameters.allowed_batch_sizes last entry must match max_batch_size");
  refused_batching(dir, "num_batch_threads { value: -1 }\n",
                   "BatchingParameters.num_batch_threads");
  refused_batching(dir, "max_batch_size: 4\n",
                   "line 1, column");  // a wrapper is a message, not a number
  // Without --enable_batching the file is an error, as in TF Serving.
  const auto alone = start_failing(
      {"--model_base_path", dir / "base", "--batching_parameters_file", dir / "batching.config"});
  CHECK(alone.exit_code == 2);
  CHECK(alone.output.find("without --enable_batching") != std::string::npos);

  // allowed_batch_sizes pads every batch to 4 rows; the answers keep their own.
  write(dir / "batching.config",
        "max_batch_size { value: 4 }\nbatch_timeout_micros { value: 0 }\n"
        "num_batch_threads { value: 1 }\nallowed_batch_sizes: 4\n"
        "thread_pool_name { value: \"est_test_pool\" }\npad_variable_length_inputs: true\n");
  Server server(dir / "base", dir,
                {"--enable_batching", "--batching_parameters_file", dir / "batching.config",
                 "--monitoring_config_file", monitoring_config(dir)});
  const Reply reply =
      http(server, "/v1/models/half_plus_two:predict", predict_body({1, 2}).dump(), &dir);
  CHECK(reply.status == 200);
  CHECK(reply.body["predictions"] == json::array({2.5, 3.0}));
  const std::string page = scrape(server);
  INFO(page);
  CHECK(
      sample(
          page,
          ":tensorflow:serving:batching_session:padding_size_count{execution_batch_size=\"4\"}") ==
      1);
  CHECK(sample(page,
               ":tensorflow:serving:batching_session:queuing_latency_count{thread_pool_name="
               "\"est_test_pool\"}") == 1);
}

TEST_CASE("est-serve --batching_parameters_file: enable_large_batch_splitting as TF Serving's") {
  if (!have_curl()) return;
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "base");
  const std::string body = predict_body({1, 2, 3, 4, 5}).dump();
  Reply unbatched;  // the answer to compare with
  {
    Server plain(dir / "base", dir, {});
    unbatched = http(plain, "/v1/models/half_plus_two:predict", body, &dir);
    REQUIRE(unbatched.status == 200);
  }
  // Without splitting, batches of 2 rows refuse a request of 5 with TF's message.
  write(dir / "batching.config",
        "max_batch_size { value: 2 }\nbatch_timeout_micros { value: 0 }\n");
  {
    Server server =
        restart(dir, {"--enable_batching", "--batching_parameters_file", dir / "batching.config"});
    const Reply refused = http(server, "/v1/models/half_plus_two:predict", body, &dir);
    INFO(refused.text);
    CHECK(refused.status == 400);
    CHECK(refused.body["error"] == "Task size 5 is larger than maximum input batch size 2");
  }
  // With splitting, the same batches of 2 rows (max_execution_batch_size) answer it in parts.
  write(dir / "batching.config",
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\n"
        "enable_large_batch_splitting { value: true }\nmax_execution_batch_size { value: 2 }\n");
  Server server =
      restart(dir, {"--enable_batching", "--batching_parameters_file", dir / "batching.config",
                    "--monitoring_config_file", monitoring_config(dir)});
  const Reply split = http(server, "/v1/models/half_plus_two:predict", body, &dir);
  INFO(split.text);
  CHECK(split.status == 200);
  CHECK(split.body == unbatched.body);
  const std::string page = scrape(server);
  INFO(page);
  // Batches of 2, 2 and 1 rows.
  const std::string batches = ":tensorflow:serving:batching_session:padding_size_count{";
  CHECK(sample(page, batches + "execution_batch_size=\"2\"}") == 2);
  CHECK(sample(page, batches + "execution_batch_size=\"1\"}") == 1);
  // max_execution_batch_size above max_batch_size is refused at startup, naming the field.
  refused_batching(dir,
                   "max_batch_size { value: 2 }\nenable_large_batch_splitting { value: true }\n"
                   "max_execution_batch_size { value: 4 }\n",
                   "BatchingParameters.max_execution_batch_size must be at most max_batch_size");
}

TEST_CASE("est-serve --enable_model_warmup: the warmup file runs before the version is served") {
  if (!have_curl() || !have_grpc_tools()) return;
  testing::ScratchDir dir;
  const fs::path version = export_half_plus_two(dir / "model", dir / "base");
  json request = predict_x("half_plus_two", {1, 2, 3})["request"];
  write_warmup(dir, version, {{{"predict", request}}, {{"predict", request}}});
  {
    Server server(dir / "base", dir,
                  {"--enable_model_warmup", "--num_request_iterations_for_warmup", "2",
                   "--monitoring_config_file", monitoring_config(dir)});
    const std::string page = scrape(server);
    INFO(page);
    CHECK(sample(page, ":tensorflow:serving:model_warmup_records_read{model_path=\"" +
                           version.string() + "\",status=\"OK\"}") == 2);
    // Two records run twice each, then the version served.
    CHECK(sample(page,
                 ":tensorflow:serving:runtime_latency_count{model_name=\"half_plus_two\","
                 "API=\"Predict\",runtime=\"est\"}") == 4);
    CHECK(http(server, "/v1/models/half_plus_two").status == 200);
    CHECK(server.log().find("Finished reading warmup data for model at") != std::string::npos);
  }
  // A version whose warmup fails is not served; the model's status has it END with the error
  // (TF Serving's GetModelStatus), and the log says why.
  auto failed_with = [&](const Server& server, const std::string& error) {
    INFO(server.log());
    CHECK(http(server, "/v1/models/half_plus_two:predict", predict_body({1}).dump(), &dir).status ==
          404);
    const json status = http(server, "/v1/models/half_plus_two").body["model_version_status"];
    INFO(status.dump());
    CHECK(status.size() == 1);
    CHECK(status[0]["state"] == "END");
    CHECK(status[0]["status"]["error_message"].get<std::string>().find(error) != std::string::npos);
    CHECK(server.log().find(error) != std::string::npos);
  };
  // A record that is not TFRecord: the version does not load, with TF Serving's message.
  write_warmup(dir, version, {{{"predict", request}}, {{"raw_hex", "0badf00d0badf00d0badf00d"}}});
  failed_with(restart(dir, {"--enable_model_warmup"}),
              "Please verify your warmup data is in TFRecord format");
  // A record that is not a PredictionLog, and one whose request is bad.
  write_warmup(dir, version, {{{"bytes_hex", "ffffffff"}}});
  failed_with(restart(dir, {"--enable_model_warmup"}), "Failed to parse warmup record 0");
  request["inputs"]["y"] = request["inputs"]["x"];
  write_warmup(dir, version, {{{"predict", request}}});
  failed_with(restart(dir, {"--enable_model_warmup"}), "input size does not match signature");
  // Without --enable_model_warmup the file is not read.
  Server server = restart(dir, {});
  CHECK(http(server, "/v1/models/half_plus_two").status == 200);
}

TEST_CASE("est-serve --file_system_poll_wait_seconds 0: the versions are loaded once") {
  if (!have_curl()) return;
  testing::ScratchDir dir;
  const fs::path first = export_half_plus_two(dir / "model", dir / "base");
  Server server(dir / "base", dir, {"--file_system_poll_wait_seconds", "0"});
  CHECK(http(server, "/v1/models/half_plus_two").status == 200);
  // A newer version appears: with 0.2 s polls it would be served within a second.
  fs::copy(first, fs::path(dir / "base") / "99999999999999", fs::copy_options::recursive);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Reply status = http(server, "/v1/models/half_plus_two");
  INFO(status.text);
  CHECK(status.body["model_version_status"].size() == 1);
  CHECK(status.body["model_version_status"][0]["version"] == fs::path(first).filename().string());
}

TEST_CASE("est-serve --rest_api_num_threads: that many connections are served at once") {
  if (!have_curl()) return;
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "base");
  for (int threads : {1, 2}) {
    Server server = restart(dir, {"--rest_api_num_threads", std::to_string(threads)});
    // A client that connects and sends nothing holds a thread (cpp-httplib waits seconds for
    // its request).
    const int idle = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(idle >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(server.port()));
    REQUIRE(::connect(idle, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted, on its thread
    const std::string curl = "curl -s -o /dev/null -m 3 " + server.url("/v1/models/half_plus_two");
    const int held = testing::run_program(curl, 30).exit_code;
    ::close(idle);
    if (threads == 1)
      CHECK(held == 28);  // curl's timeout: no thread was free for it
    else
      CHECK(held == 0);
    CHECK(testing::run_program(curl, 30).exit_code == 0);  // the thread is free again
  }
}

TEST_CASE("est-serve --grpc_max_threads: gRPC's thread quota, as TF Serving sets it") {
  if (!have_grpc_tools()) return;
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "base");
  for (int threads : {1, 0}) {
    const int port = testing::free_port();
    Server server = restart(
        dir, {"--port", std::to_string(port), "--grpc_max_threads", std::to_string(threads)});
    const auto answers = call(dir, port, {predict_x("half_plus_two", {1})});
    INFO(answers[0].dump());
    if (threads == 1) {  // the one thread polls: none is left to answer
      CHECK(answers[0]["error"]["code"] == "RESOURCE_EXHAUSTED");
      CHECK(answers[0]["error"]["details"] == "Server Threadpool Exhausted");
    } else {
      CHECK(floats(answers[0]["response"]["outputs"]["y"]) == std::vector<double>{2.5});
    }
  }
}
