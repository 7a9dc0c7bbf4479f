// Serving latency of the tutorial CNN (examples/cnn_model.h) exported with
// Estimator::export_saved_model: one 28x28x1 image per request, p50/p99 latency and throughput
// at 1, 8 and 64 concurrent clients through est-serve on 127.0.0.1 (REST: cpp-httplib clients,
// one kept-alive connection each, TF Serving's row-format JSON; gRPC: Predict through the C++
// stubs, bench/serving_grpc_client.h, when est-serve has gRPC), against Estimator::predict
// in-process (one call per image: it restores the checkpoint each call, as TF's does) and est's
// ONNX interpreter in-process (what est-serve runs). The server's own cost per request (JSON parse,
// tensor conversion, the response) is timed apart: handle_rest in-process minus the interpreter's
// run of the same tensor. bench/serving_ort.js times onnxruntime-node on the same model.onnx;
// with --ort_http, the same REST clients also time onnxruntime-node behind Node's HTTP server
// (bench/serving_ort_http.js), the peer that pays HTTP and JSON as est-serve does.
//
//   serving_bench [--est_serve build/tools/est-serve] [--requests N] [--dir DIR]
//                 [--ort_http bench/serving_ort_http.js --node_path build/npm/node_modules]
// Without --est_serve only the in-process runners and server_overhead run (for profiling the
// interpreter, or comparing two builds of it back to back).
// Lines: `<runner> clients=C p50_ms=... p99_ms=... requests_per_sec=...`, `server_overhead
// p50_ms=... p99_ms=...`, the CPU time per request of the clients and of est-serve after each
// est-serve line (`client_cpu_us_per_request=... server_cpu_us_per_request=...`; both share the
// machine's cores) and of the interpreter after each of its lines, `model_onnx=PATH` for the
// onnxruntime comparison,
// `interpreter_logits=` (hex floats) to check that two builds give the same bits, and issue
// 31's targets, each `target NAME=VALUE BOUND met=yes|no` (ratios of this run's requests/s).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <est/est.h>

#include "bench/serving_peer.h"
#include "examples/cnn_model.h"
#include "export/rest_api.h"
#if EST_SERVE_GRPC
#include "bench/serving_grpc_client.h"
#endif

namespace {

using est::Tensor;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

est::EstimatorSpec model_fn(const est::Features& features, const Tensor& labels, est::ModeKeys mode,
                            est::ModelContext& ctx) {
  Tensor logits = examples::tutorial_cnn(ctx, features.at("image"));
  if (mode == est::ModeKeys::kPredict)
    return est::EstimatorSpec::predict(
        {{"logits", logits}, {"classes", est::ops::argmax(logits, 1)}});
  Tensor loss = est::nn::sparse_softmax_cross_entropy(labels, logits);
  return est::EstimatorSpec::train(loss, est::optim::sgd(1e-3).minimize(loss, ctx));
}

double since_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Prints the line of a run; returns its requests/s.
double report(const std::string& runner, int clients, std::vector<double> latencies_ms,
              double wall_seconds) {
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto at = [&](double q) {
    return latencies_ms[std::min(
        latencies_ms.size() - 1,
        static_cast<size_t>(q * static_cast<double>(latencies_ms.size())))];
  };
  const double per_second = static_cast<double>(latencies_ms.size()) / wall_seconds;
  fmt::print("{} clients={} p50_ms={:.2f} p99_ms={:.2f} requests_per_sec={:.1f}\n", runner, clients,
             at(0.5), at(0.99), per_second);
  std::fflush(stdout);
  return per_second;
}

// `clients` threads, each sending its share of `requests` one after another; `send(c)` (c: the
// thread's index) returns false on a failed request (counted and reported, never timed), and
// `finish(c)`, when given, is called once thread c has sent its share. Returns the requests/s
// (0 when every request failed).
double run_clients(const std::string& runner, int clients, int requests,
                   const std::function<bool(int)>& send,
                   const std::function<void(int)>& finish = nullptr) {
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::atomic<int> failed{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (int i = c; i < requests; i += clients) {
        const auto sent = Clock::now();
        if (send(c))
          latencies[static_cast<size_t>(c)].push_back(since_ms(sent));
        else
          ++failed;
      }
      if (finish) finish(c);
    });
  for (auto& thread : threads) thread.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& each : latencies) all.insert(all.end(), each.begin(), each.end());
  if (failed > 0) fmt::print("{} clients={} failed_requests={}\n", runner, clients, failed.load());
  return all.empty() ? 0.0 : report(runner, clients, all, wall);
}

// CPU seconds of this process (the clients, with gRPC's threads) so far.
double own_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// `run()` (the requests of one line, `requests` of them), followed by the CPU time per request
// of the clients (this process) and of the server: on two cores shared by both, a client's
// cost is time the server does not get.
// `server_cpu` gives the server's CPU seconds so far (by default those of the process alone).
double with_cpu_costs(const std::string& runner, int clients, int requests, pid_t server,
                      const std::function<double()>& run,
                      std::function<double(pid_t)> server_cpu = est::bench::cpu_seconds_of) {
  const double client_before = own_cpu_seconds(), server_before = server_cpu(server);
  const double per_second = run();
  const double client = own_cpu_seconds() - client_before;
  const double served = server_cpu(server) - server_before;
  fmt::print("{} clients={} client_cpu_us_per_request={:.1f} server_cpu_us_per_request={:.1f}\n",
             runner, clients, client * 1e6 / requests, served * 1e6 / requests);
  std::fflush(stdout);
  return per_second;
}

struct ServerProcess {
  pid_t pid = -1;
  int port = 0;       // REST
  int grpc_port = 0;  // 0: est-serve built without gRPC
  ~ServerProcess() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid, nullptr, WNOHANG) != pid; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it; the socket is
// closed, so that only est-serve listens there).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) ::close(fd);
  if (!bound) throw est::UnavailableError("no free port on 127.0.0.1");
  return ntohs(address.sin_port);
}

// est-serve on 127.0.0.1: REST on a free port, read back from its line, and gRPC on another
// (when it has gRPC), at most 60 s.
void start_server(ServerProcess& server, const std::string& binary, const std::string& base,
                  const std::string& log) {
  std::fflush(stdout);
  const std::string rest_port = std::to_string(free_port());
  const std::string grpc_port = EST_SERVE_GRPC ? std::to_string(free_port()) : "0";
  server.pid = fork();
  if (server.pid == 0) {
    if (std::freopen(log.c_str(), "w", stdout) == nullptr || dup2(fileno(stdout), 2) < 0)
      _exit(127);
    execl(binary.c_str(), binary.c_str(), "--model_base_path", base.c_str(), "--model_name", "cnn",
          "--port", grpc_port.c_str(), "--rest_api_port", rest_port.c_str(),
          "--rest_api_num_threads", "8", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string marker = "Exporting HTTP/REST API at:127.0.0.1:";
  for (int i = 0; i < 600 && server.port == 0; ++i) {
    std::ifstream file(log);
    std::string text((std::istreambuf_iterator<char>(file)), {});
    if (auto found = text.find(marker); found != std::string::npos)
      server.port = std::stoi(text.substr(found + marker.size()));
    else if (waitpid(server.pid, nullptr, WNOHANG) == server.pid)
      throw est::UnavailableError("est-serve exited: " + text);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (server.port == 0) throw est::DeadlineExceededError("est-serve did not start within 60 s");
  server.grpc_port = std::stoi(grpc_port);
}

// REST :predict of `body` from `clients` threads, each on its own kept-alive connection
// (cpp-httplib's client; est-serve closes one after cpp-httplib's 5 requests and the client
// opens the next), closed once its thread is done: a connection left open would hold one of
// est-serve's threads for cpp-httplib's keep-alive timeout (5 s) while other clients wait.
// Returns the requests/s.
double time_rest(const std::string& runner, int port, const std::string& body, int clients,
                 int requests) {
  std::vector<std::unique_ptr<httplib::Client>> connections(static_cast<size_t>(clients));
  std::mutex mutex;
  std::string first_error;
  auto send = [&](int c) {
    std::unique_ptr<httplib::Client>& client = connections[static_cast<size_t>(c)];
    if (!client) {
      client = std::make_unique<httplib::Client>("127.0.0.1", port);
      client->set_keep_alive(true);
      client->set_tcp_nodelay(true);  // as curl and Python's http.client send
    }
    auto result = client->Post("/v1/models/cnn:predict", body, "application/json");
    const bool ok = result && result->status == 200;
    if (!ok) {
      std::lock_guard lock(mutex);
      if (first_error.empty())
        first_error =
            result ? fmt::format("HTTP {}", result->status) : httplib::to_string(result.error());
    }
    return ok;
  };
  const double per_second = run_clients(
      runner, clients, requests, send, [&](int c) { connections[static_cast<size_t>(c)].reset(); });
  if (!first_error.empty())
    fmt::print("{} clients={} first_error={}\n", runner, clients, first_error);
  return per_second;
}

// Throws unless the peer answers `body` as est-serve does: the same outputs, classes equal and
// logits within 1e-4 (two runtimes: not bit for bit). Prints `ort_http_matches_est_serve=yes`.
void check_same_predictions(int est_serve_port, int peer_port, const std::string& body) {
  auto predictions = [&](int port) {
    httplib::Client client("127.0.0.1", port);
    auto result = client.Post("/v1/models/cnn:predict", body, "application/json");
    if (!result || result->status != 200)
      throw est::InternalError(
          fmt::format("predict on port {}: {}", port,
                      result ? result->body : httplib::to_string(result.error())));
    return nlohmann::json::parse(result->body).at("predictions").at(0);
  };
  const nlohmann::json ours = predictions(est_serve_port), theirs = predictions(peer_port);
  bool same = ours.size() == theirs.size() && ours.at("classes") == theirs.at("classes");
  const auto& a = ours.at("logits");
  const auto& b = theirs.at("logits");
  same = same && a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i)
    same = std::abs(a[i].get<double>() - b[i].get<double>()) <=
           1e-4 * std::max(1.0, std::abs(a[i].get<double>()));
  if (!same)
    throw est::InternalError("the onnxruntime peer answers differently: est-serve " + ours.dump() +
                             ", peer " + theirs.dump());
  fmt::print("ort_http_matches_est_serve=yes\n");
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"serving_bench: the tutorial CNN served by est-serve, against in-process predict",
               "serving_bench"};
  std::string est_serve, dir;
  int requests = 256;
  app.add_option("--est_serve", est_serve,
                 "path of the est-serve binary (without it, the in-process runners only)");
  app.add_option("--requests", requests, "requests per concurrency level")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "working directory (default: a new one under /tmp)");
  std::vector<int> levels{1, 8, 64};
  app.add_option("--clients", levels,
                 "concurrency levels to time (default 1 8 64; the targets need 1 and 64)")
      ->check(CLI::PositiveNumber);
  std::string api = "both";
  app.add_option("--api", api, "est-serve's APIs to time: rest, grpc or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"rest", "grpc", "both"}));
  std::string ort_http, node_path;
  app.add_option("--ort_http", ort_http,
                 "bench/serving_ort_http.js: also time onnxruntime-node behind Node's HTTP "
                 "server, with the same REST clients (needs --node_path)");
  app.add_option("--node_path", node_path, "the node_modules directory holding onnxruntime-node");
  CLI11_PARSE(app, argc, argv);
  if (dir.empty()) {
    char pattern[] = "/tmp/serving_bench_XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw est::InternalError("mkdtemp failed");
    dir = pattern;
  }

  // One training step gives the checkpoint that is exported.
  est::Estimator estimator(model_fn, {.model_dir = dir + "/model",
                                      .tf_random_seed = 1,
                                      .save_summary_steps = 0,
                                      .log_step_count_steps = 1000});
  est::ops::Generator generator(3);
  Tensor images = est::ops::random_uniform({64, 28, 28, 1}, 0, 1, generator);
  Tensor labels =
      est::ops::cast(est::ops::random_uniform({64}, 0, 10, generator), est::DType::kI64);
  estimator.train(
      [&](est::ModeKeys, const est::InputContext*) {
        return est::data::Dataset::from_tensor_slices(est::Features{{"image", images}}, labels)
            .batch(64);
      },
      {.steps = 1});
  const std::string base = dir + "/export";
  const std::string exported = estimator.export_saved_model(
      base, est::build_raw_serving_input_receiver_fn({{"image", {{-1, 28, 28, 1}}}}));
  fmt::print("model_onnx={}/model.onnx\n", exported);

  Tensor image = est::ops::slice(images, {0, 0, 0, 0}, {1, 28, 28, 1});
  nlohmann::json instance = nlohmann::json::array();
  {
    std::vector<float> values = image.to_vector<float>();
    nlohmann::json rows = nlohmann::json::array();
    for (int y = 0; y < 28; ++y) {
      nlohmann::json row = nlohmann::json::array();
      for (int x = 0; x < 28; ++x) row.push_back({values[static_cast<size_t>(y * 28 + x)]});
      rows.push_back(row);
    }
    instance.push_back(rows);
  }
  const std::string body = nlohmann::json{{"instances", instance}}.dump();

  // In-process: Estimator::predict (restores each call) and the ONNX interpreter.
  const int predict_calls = std::max(1, requests / 16);
  run_clients("estimator_predict", 1, predict_calls, [&](int) {
    auto out = estimator.predict([&](est::ModeKeys, const est::InputContext*) {
      return est::data::Dataset::from_tensor_slices(est::Features{{"image", image}}).batch(1);
    });
    return out.size() == 1;
  });
  est::serving::ModelManager models("cnn", base);
  models.poll();
  const auto servable = models.current();
  {  // The logits bit for bit (hex floats), to compare two builds of the interpreter.
    std::string bits;
    for (float v : servable->model.run({{"image", image}}).at("logits").to_vector<float>())
      bits += fmt::format("{}{:a}", bits.empty() ? "" : ",", v);
    fmt::print("interpreter_logits={}\n", bits);
  }
  std::map<int, double> interpreter, rest, grpc;  // requests/s by clients
  for (int clients : levels) {
    const double before = own_cpu_seconds();
    interpreter[clients] = run_clients("onnx_interpreter", clients, requests, [&](int) {
      return servable->model.run({{"image", image}}).count("logits") == 1;
    });
    fmt::print("onnx_interpreter clients={} cpu_us_per_request={:.1f}\n", clients,
               (own_cpu_seconds() - before) * 1e6 / requests);
  }
  // The server's own work per request: handle_rest minus the model's run, in-process.
  double overhead_p50 = 0;
  {
    std::vector<double> overhead;
    for (int i = 0; i < requests; ++i) {
      auto start = Clock::now();
      servable->model.run({{"image", image}});
      const double model_ms = since_ms(start);
      start = Clock::now();
      auto response = est::serving::handle_rest(models, "POST", "/v1/models/cnn:predict", body);
      const double rest_ms = since_ms(start);
      if (response.status != 200) throw est::InternalError("handle_rest: " + response.body);
      overhead.push_back(std::max(0.0, rest_ms - model_ms));
    }
    std::sort(overhead.begin(), overhead.end());
    overhead_p50 = overhead[overhead.size() / 2];
    fmt::print("server_overhead p50_ms={:.3f} p99_ms={:.3f} request_bytes={}\n", overhead_p50,
               overhead[overhead.size() * 99 / 100], body.size());
  }

  if (est_serve.empty()) return 0;
  ServerProcess server;
  start_server(server, est_serve, base, dir + "/est-serve.log");
  for (int clients : levels) {
    if (api != "grpc")
      rest[clients] = with_cpu_costs("est_serve_rest", clients, requests, server.pid, [&] {
        return time_rest("est_serve_rest", server.port, body, clients, requests);
      });
#if EST_SERVE_GRPC
    if (api == "rest") continue;
    // One channel (one connection) a client, as `clients` client processes would hold them.
    std::vector<std::unique_ptr<est::bench::GrpcPredictClient>> channels;
    for (int c = 0; c < clients; ++c)
      channels.push_back(
          std::make_unique<est::bench::GrpcPredictClient>(server.grpc_port, "cnn", "image", image));
    std::string first_error;
    grpc[clients] = with_cpu_costs("est_serve_grpc", clients, requests, server.pid, [&] {
      return run_clients("est_serve_grpc", clients, requests, [&](int c) {
        return channels[static_cast<size_t>(c)]->predict(&first_error);
      });
    });
    if (!first_error.empty())
      fmt::print("est_serve_grpc clients={} first_error={}\n", clients, first_error);
#endif
  }
  // The peer over the same protocol: onnxruntime-node behind Node's HTTP server, the same
  // body, clients and kept-alive connections (REST only: it has no gRPC API).
  std::map<int, double> peer;
  if (!ort_http.empty() && api != "grpc") {
    const std::string model = fs::path(exported) / "model.onnx";
    est::bench::OrtHttpPeer node(node_path, ort_http, model, free_port(), dir + "/ort-http.log");
    check_same_predictions(server.port, node.port(), body);
    for (int clients : levels)
      peer[clients] = with_cpu_costs(
          "ort_http_rest", clients, requests, node.pid(),
          [&] { return time_rest("ort_http_rest", node.port(), body, clients, requests); },
          est::bench::process_tree_cpu_seconds);
  }
  // Issue 31's targets, each a ratio of this run's figures (those this run has).
  auto target = [](const std::string& name, double value, const std::string& bound, bool met) {
    if (std::isfinite(value) && value > 0)
      fmt::print("target {}={:.3f} {} met={}\n", name, value, bound, met ? "yes" : "no");
  };
  target("server_overhead_p50_ms", overhead_p50, "<=0.05", overhead_p50 <= 0.05);
  target("rest_1_over_interpreter_1", rest[1] / interpreter[1], ">=0.8",
         rest[1] >= 0.8 * interpreter[1]);
  if (EST_SERVE_GRPC) {
    target("grpc_1_over_rest_1", grpc[1] / rest[1], ">=1", grpc[1] >= rest[1]);
    target("grpc_64_over_interpreter_64", grpc[64] / interpreter[64], ">=0.8",
           grpc[64] >= 0.8 * interpreter[64]);
  }
  target("rest_64_over_interpreter_64", rest[64] / interpreter[64], ">=0.8",
         rest[64] >= 0.8 * interpreter[64]);
  // The same bounds against the peer over the same protocol, the clients on the same cores.
  if (!peer.empty()) {
    target("rest_1_over_ort_http_1", rest[1] / peer[1], ">=0.8", rest[1] >= 0.8 * peer[1]);
    target("rest_64_over_ort_http_64", rest[64] / peer[64], ">=0.8", rest[64] >= 0.8 * peer[64]);
    if (EST_SERVE_GRPC)
      target("grpc_64_over_ort_http_64", grpc[64] / peer[64], ">=0.8", grpc[64] >= 0.8 * peer[64]);
  }
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "serving_bench: {}\n", error.what());
  return 1;
}
