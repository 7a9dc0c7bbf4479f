// The est-serve harness of the REST suites (rest_test.cpp, rest_examples_test.cpp): models
// exported with Estimator::export_saved_model, est-serve started on 127.0.0.1 with REST on a
// free port (--rest_api_port, read back from its "Exporting HTTP/REST API at:" line) and gRPC
// off (--port 0), requests with curl.
// Every wait is bounded; the server is stopped by its pid.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "estimator/estimator.h"
#include "nn/nn.h"
#include "tests/command.h"
#include "tests/process_group.h"
#include "tests/skip.h"

namespace est::testing::serve {

using nlohmann::json;
namespace fs = std::filesystem;

// y = a * x + b, TF Serving's half_plus_two when a = 0.5 and b = 2.
inline ModelFn plus_model_fn(double a, double b) {
  return [a, b](const Features& features, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    Tensor va = ctx.get_variable("a", {}, DType::kF32, nn::constant(a));
    Tensor vb = ctx.get_variable("b", {}, DType::kF32, nn::constant(b));
    Tensor y = ops::add(ops::mul(features.at("x"), va), vb);
    if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"y", y}});
    Tensor loss = nn::mean_squared_error(labels, y);
    return EstimatorSpec::train(loss, nn::optim::sgd(0.0).minimize(loss, ctx));
  };
}

inline RunConfig quiet(const std::string& dir) {
  return {.model_dir = dir,
          .save_summary_steps = 0,
          .save_checkpoints_secs = std::nullopt,
          .log_step_count_steps = 1000};
}

// Trains `model_fn` one step on `features` and exports it under `base`; returns the export.
inline std::string export_model(const ModelFn& model_fn, const std::string& model_dir,
                                const std::string& base, const Features& features,
                                const Tensor& labels,
                                const std::map<std::string, TensorSpec>& specs) {
  Estimator estimator(model_fn, quiet(model_dir));
  estimator.train(
      [&](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(features, labels).batch(2);
      },
      {.steps = 1});
  return estimator.export_saved_model(base, build_raw_serving_input_receiver_fn(specs));
}

inline std::string export_half_plus_two(const std::string& dir, const std::string& base,
                                        double a = 0.5, double b = 2.0) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  return export_model(plus_model_fn(a, b), dir, base, {{"x", x}}, x, {{"x", {{-1}}}});
}

// The small classifier of the REST suites, whose answers are compared with Estimator::predict's:
// a dense layer "logits" of 3 classes over the feature "x" [batch, 2], trained 3 steps (batches
// of 2) with softmax cross-entropy on classifier_rows(); in PREDICT its spec is
// `predict_spec(logits)`.
inline Tensor classifier_rows() {
  return Tensor::from_vector(std::vector<float>{0.1f, 0.7f, -0.3f, 0.2f, 0.9f, -1.0f, 0.5f, 0.4f},
                             {4, 2});
}

inline Estimator train_classifier(std::function<EstimatorSpec(const Tensor& logits)> predict_spec,
                                  const std::string& model_dir) {
  auto model_fn = [predict_spec](const Features& features, const Tensor& labels, ModeKeys mode,
                                 ModelContext& ctx) {
    Tensor logits = nn::dense(ctx, features.at("x"), {.units = 3, .name = "logits"});
    if (mode == ModeKeys::kPredict) return predict_spec(logits);
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    return EstimatorSpec::train(loss, nn::optim::sgd(0.1).minimize(loss, ctx));
  };
  Estimator estimator(model_fn, quiet(model_dir));
  const Tensor x = classifier_rows();
  const Tensor y = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 1});
  estimator.train(
      [&](ModeKeys, const InputContext*) {
        return data::Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(2);
      },
      {.steps = 3});
  return estimator;
}

// Estimator::predict on classifier_rows(), in one batch: one Predictions a row.
inline std::vector<Predictions> predict_classifier_rows(Estimator& estimator) {
  const Tensor x = classifier_rows();
  return estimator.predict([&](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(Features{{"x", x}}).batch(4);
  });
}

class Server {
 public:
  // `extra` flags are passed on; with --ssl_cert_file the server speaks HTTPS, and curl trusts
  // that certificate.
  Server(const std::string& base, const testing::ScratchDir& dir,
         std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--model_base_path",
                                  base,
                                  "--model_name",
                                  "half_plus_two",
                                  "--port",
                                  "0",
                                  "--rest_api_port",
                                  std::to_string(testing::free_port()),
                                  "--address",
                                  "127.0.0.1",
                                  "--file_system_poll_wait_seconds",
                                  "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    start(dir, args, "Exporting HTTP/REST API at:127.0.0.1:");
  }
  // est-serve with exactly `args`; ready once it printed `marker` and a port, which port() then
  // is.
  Server(const testing::ScratchDir& dir, const std::vector<std::string>& args,
         const std::string& marker) {
    start(dir, args, marker);
  }
  ~Server() {
    if (pid_ < 0) return;  // already ended by terminate()
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {  // at most 10 s, then SIGKILL
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::string url(const std::string& path) const {
    return (certificate_.empty() ? "http" : "https") + std::string("://127.0.0.1:") +
           std::to_string(port_) + path;
  }
  int port() const { return port_; }
  // SIGTERM, then the exit status once it ended within `bound` (nullopt: still running; the
  // destructor kills it).
  std::optional<int> terminate(std::chrono::milliseconds bound) {
    kill(pid_, SIGTERM);
    for (auto end = std::chrono::steady_clock::now() + bound;
         std::chrono::steady_clock::now() < end;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
  // What the server printed so far.
  std::string log() const {
    std::ifstream file(log_);
    return std::string((std::istreambuf_iterator<char>(file)), {});
  }
  // What curl needs to trust the server's certificate (empty for HTTP).
  std::string curl_options() const {
    return certificate_.empty() ? "" : "--cacert " + testing::shell_quote(certificate_) + " ";
  }

 private:
  void start(const testing::ScratchDir& dir, std::vector<std::string> args,
             const std::string& marker) {
    log_ = dir / "server.log";
    fs::remove(log_);  // an earlier server's log would be read as this one's
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--ssl_cert_file") certificate_ = args[i + 1];
    args.insert(args.begin(), EST_SERVE);
    std::fflush(stdout);  // else the child's copy of the buffer is written twice
    std::fflush(stderr);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      FILE* out = std::freopen(log_.c_str(), "w", stdout);
      if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // at most 60 s
      std::ifstream file(log_);
      std::string text((std::istreambuf_iterator<char>(file)), {});
      if (auto at = text.find(marker); at != std::string::npos)
        port_ = std::stoi(text.substr(at + marker.size()));
      else if (waitpid(pid_, nullptr, WNOHANG) == pid_)
        FAIL("est-serve exited: " << text);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (port_ == 0) {  // the destructor does not run for a constructor that throws
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      FAIL("est-serve did not start within 60 s");
    }
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
  std::string certificate_;
};

struct Reply {
  int status = 0;
  json body;         // null when the answer is not JSON nlohmann reads
  std::string text;  // the answer as sent
};

inline constexpr const char* kJsonPost = "-H 'Content-Type: application/json' --data-binary";

// One request with curl; `body` empty: GET. `post_options` are curl's options before the body's
// file (--path-as-is and the like may lead them).
inline Reply http(const Server& server, const std::string& path, const std::string& body = {},
                  const testing::ScratchDir* dir = nullptr,
                  const std::string& post_options = kJsonPost) {
  std::string command = "curl -s -m 30 -w '\\n%{http_code}' " + server.curl_options();
  if (!body.empty()) {
    REQUIRE(dir != nullptr);
    std::ofstream(*dir / "body.json", std::ios::binary) << body;
    command += "-X POST " + post_options + " @" + testing::shell_quote(*dir / "body.json") + " ";
  } else {
    command += post_options == kJsonPost ? "" : post_options + " ";
  }
  auto result = testing::run_program(command + testing::shell_quote(server.url(path)), 60);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto newline = result.output.rfind('\n');
  Reply reply{std::stoi(result.output.substr(newline + 1)), {}, result.output.substr(0, newline)};
  reply.body = json::parse(reply.text, nullptr, false);
  return reply;
}

inline bool have_curl() { return testing::run_program("curl --version", 10).exit_code == 0; }

}  // namespace est::testing::serve
