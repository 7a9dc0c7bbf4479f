// est-serve: a drop-in for tensorflow_model_server over est's exports: TF Serving's gRPC API
// (export/grpc/grpc_server.h) on --port (default 8500; 0: off) and its REST API
// (export/rest_api.h) on --rest_api_port (default 0: off), for the model of --model_name and
// --model_base_path or the models of --model_config_file (TF Serving's ModelServerConfig in
// protobuf's text format, re-read every --model_config_file_poll_wait_seconds when that is
// above 0: a changed file is applied without a restart, one that does not parse is logged and
// the last good config kept). Flags follow tensorflow_model_server's
// (tensorflow_serving/model_servers/main.cc); its flags est-serve does not act on are accepted
// with a warning naming them (tools/tf_serving_flags.h), any other unknown flag is a usage
// error. --address is the one address both APIs bind (default loopback, where TF Serving binds
// every address).
//
// The server prints "Running gRPC ModelServer at <address>:<port> ..." and "Exporting HTTP/REST
// API at:<address>:<port> ..." once they listen (the lines TF Serving logs), polls the base
// paths for new versions every --file_system_poll_wait_seconds on a thread of its own and
// swaps them in without dropping requests (export/servable.h). Bodies over --max_request_bytes
// are refused (413) before they are read, whatever their Content-Type (TF Serving reads any body
// as JSON); every connection has read and write timeouts of --rest_api_timeout_in_ms, and on
// SIGTERM or SIGINT requests in flight get that long to finish before the process exits
// (status 1 when it abandoned some).
// --ssl_cert_file and --ssl_key_file serve HTTPS instead; --enable_batching runs concurrent
// predict requests as one batch (export/batcher.h; --max_batch_size, --batch_timeout_micros, or
// TF Serving's --batching_parameters_file, export/grpc/serving_configs.h).
// --monitoring_config_file with prometheus_config enabled serves TF Serving's metrics
// (export/serving_metrics.h) in Prometheus's text format at its path on the REST port;
// --enable_model_warmup runs each version's warmup requests before it is served
// (export/grpc/warmup.h); --file_system_poll_wait_seconds 0 loads the versions once, at startup.
#include <httplib.h>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "export/rest_api.h"
#include "export/server_core.h"
#include "export/serving_metrics.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "tools/tf_serving_flags.h"
#if EST_SERVE_GRPC
#include "export/grpc/grpc_server.h"
#include "export/grpc/model_config.h"
#include "export/grpc/serving_configs.h"
#include "export/grpc/warmup.h"
#endif

namespace {

// The models to serve: those of --model_config_file, or the one of --model_name and
// --model_base_path.
std::vector<est::serving::ModelOptions> configured_models(const std::string& config_file,
                                                          const std::string& name,
                                                          const std::string& base_path) {
  if (config_file.empty()) return {{.name = name, .base_path = base_path}};
#if EST_SERVE_GRPC
  return est::serving::read_model_config_file(config_file);
#else
  throw est::UnimplementedError(
      "--model_config_file needs est-serve built with gRPC (-Dgrpc=enabled)");
#endif
}

// Re-reads --model_config_file; applies it when its text changed since `applied`, or logs why
// it cannot and keeps the models served.
void reload_config(est::serving::ServerCore& core, const std::string& path, std::string& applied) {
  std::ifstream file(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(file)), {});
  if (!file || text == applied) return;
  try {
    core.reconfigure(configured_models(path, "", ""));
    applied = text;
    est::log::info("Applied the model config of {}", path);
    core.poll();
  } catch (const std::exception& error) {
    applied = text;  // logged once per change of the file
    est::log::error("{}; serving the last good config until the file changes", error.what());
  }
}

#if EST_SERVE_GRPC
std::unique_ptr<est::serving::Batcher> make_batcher(const std::string& parameters_file,
                                                    est::serving::Batcher::Options options) {
  if (!parameters_file.empty())
    options = est::serving::read_batching_parameters_file(parameters_file);
  return std::make_unique<est::serving::Batcher>(std::move(options));
}
#else
// Without gRPC, the text-format config files (TF Serving's protos) cannot be read.
std::unique_ptr<est::serving::Batcher> make_batcher(const std::string& parameters_file,
                                                    est::serving::Batcher::Options options) {
  if (!parameters_file.empty())
    throw est::UnimplementedError(
        "--batching_parameters_file needs est-serve built with gRPC (-Dgrpc=enabled)");
  return std::make_unique<est::serving::Batcher>(std::move(options));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"est-serve: TensorFlow Serving's gRPC and REST APIs for est exports", "est-serve"};
  app.allow_extras();  // TF Serving's flags est-serve does not act on (filter_extras)
  // A flag given twice takes its last value, as TF's flag parser (util/command_line_flags.cc).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string model_base_path, model_name = "default", address = "127.0.0.1";
  std::string ssl_cert_file, ssl_key_file, model_config_file, monitoring_config_file,
      batching_parameters_file;
  int port = 8500, rest_port = 0, timeout_ms = 30000, num_threads = 8, grpc_max_threads = 0;
  double poll_seconds = 1, config_poll_seconds = 0;
  size_t max_request_bytes = 16u << 20;
  bool enable_batching = false, enable_model_warmup = false;
  int warmup_iterations = 1;
  est::serving::ServerCoreOptions core_options;
  int64_t max_batch_size = 32, batch_timeout_micros = 1000;
  app.add_option("--model_base_path", model_base_path,
                 "directory of numbered versions (export_saved_model's export_dir_base)");
  app.add_option("--model_name", model_name, "the model's name in requests")->capture_default_str();
  app.add_option("--model_config_file", model_config_file,
                 "ModelServerConfig in protobuf's text format: several models, each with its "
                 "base_path, model_version_policy and version_labels (instead of --model_name "
                 "and --model_base_path)");
  app.add_option("--model_config_file_poll_wait_seconds", config_poll_seconds,
                 "how often to re-read --model_config_file; 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--port", port,
                 "gRPC port (TF Serving's PredictionService and ModelService); 0: off")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--rest_api_port", rest_port, "REST port; 0: off")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--grpc_max_threads", grpc_max_threads,
                 "threads answering gRPC requests at most (Predict then runs on them too, "
                 "not on gRPC's callback threads); 0: gRPC's default")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--address", address, "the address to bind, and only it")->capture_default_str();
  app.add_option("--rest_api_timeout_in_ms", timeout_ms,
                 "read/write timeout per connection; on SIGTERM, how long requests in flight "
                 "may take before they are abandoned")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rest_api_num_threads", num_threads, "threads answering requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--file_system_poll_wait_seconds", poll_seconds,
                 "how often to look for a new version; 0: once, at startup")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max_request_bytes", max_request_bytes, "larger bodies are refused (413)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--allow_version_labels_for_unavailable_models",
               core_options.allow_version_labels_for_unavailable_models,
               "let version_labels name versions not loaded yet (TF Serving's flag)");
  app.add_flag("--enable_batching", enable_batching,
               "run concurrent predict requests together (TF Serving's batching)");
  app.add_option("--max_batch_size", max_batch_size, "rows per batch, with --enable_batching")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch_timeout_micros", batch_timeout_micros,
                 "how long a batch waits for more requests, with --enable_batching")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batching_parameters_file", batching_parameters_file,
                 "TF Serving's BatchingParameters in protobuf's text format, with "
                 "--enable_batching (instead of --max_batch_size and --batch_timeout_micros)");
  app.add_option("--monitoring_config_file", monitoring_config_file,
                 "TF Serving's MonitoringConfig in protobuf's text format: with prometheus_config "
                 "enabled, metrics in Prometheus's format at its path on the REST port");
  app.add_flag("--enable_model_warmup", enable_model_warmup,
               "run each version's assets.extra/tf_serving_warmup_requests before serving it");
  app.add_option("--num_request_iterations_for_warmup", warmup_iterations,
                 "times each warmup request runs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ssl_cert_file", ssl_cert_file, "PEM certificate: serve HTTPS");
  app.add_option("--ssl_key_file", ssl_key_file, "PEM private key of --ssl_cert_file");
  CLI11_PARSE(app, argc, argv);
  if (const std::string unknown = est::serve::filter_extras(app.remaining()); !unknown.empty()) {
    std::fprintf(stderr, "est-serve: unknown argument %s (see --help)\n", unknown.c_str());
    return 2;
  }
  if (model_base_path.empty() == model_config_file.empty()) {
    std::fprintf(stderr, "est-serve: give --model_base_path or --model_config_file (one)\n");
    return 2;
  }
  if (port == 0 && rest_port == 0) {
    std::fprintf(stderr, "est-serve: --port and --rest_api_port are both 0: nothing to serve\n");
    return 2;
  }
  if (port != 0 && port == rest_port) {
    std::fprintf(stderr, "est-serve: --port and --rest_api_port must differ\n");
    return 2;
  }
#if !EST_SERVE_GRPC
  if (port != 0) {
    est::log::warning("est-serve is built without gRPC: --port {} is not served", port);
    port = 0;
  }
#endif
  if (ssl_cert_file.empty() != ssl_key_file.empty()) {
    std::fprintf(stderr, "est-serve: give both --ssl_cert_file and --ssl_key_file, or neither\n");
    return 2;
  }
  if (!batching_parameters_file.empty() && !enable_batching) {
    std::fprintf(stderr,
                 "est-serve: --batching_parameters_file is set without --enable_batching\n");
    return 2;
  }

  // SIGTERM and SIGINT stop the server from a thread that waits for them (blocked everywhere
  // else: the threads started below inherit the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGUSR1);  // sent by main to end the waiter
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  est::serving::ServerCore models(core_options);
  std::string applied_config;  // the text of --model_config_file last applied
  std::unique_ptr<est::serving::Batcher> batcher;
  std::string metrics_path;  // Prometheus's page; empty: none
  try {
    if (enable_batching)
      batcher = make_batcher(batching_parameters_file,
                             {.max_batch_size = max_batch_size,
                              .batch_timeout = std::chrono::microseconds(batch_timeout_micros)});
#if EST_SERVE_GRPC
    if (!monitoring_config_file.empty()) {
      const auto monitoring = est::serving::read_monitoring_config_file(monitoring_config_file);
      if (monitoring.prometheus) metrics_path = monitoring.path;
      if (monitoring.prometheus && rest_port == 0)
        est::log::warning("--monitoring_config_file: the metrics need --rest_api_port; not served");
    }
    if (enable_model_warmup)
      models.set_load_hook([&batcher, warmup_iterations](const est::serving::Servable& servable) {
        est::serving::run_warmup(servable, batcher.get(), warmup_iterations);
      });
#else
    if (!monitoring_config_file.empty() || enable_model_warmup)
      throw est::UnimplementedError(
          "--monitoring_config_file and --enable_model_warmup need est-serve built with gRPC");
#endif
    models.reconfigure(configured_models(model_config_file, model_name, model_base_path));
    if (!model_config_file.empty()) {
      std::ifstream file(model_config_file, std::ios::binary);
      applied_config.assign(std::istreambuf_iterator<char>(file), {});
    }
    models.poll();
    for (const std::string& name : models.names())
      if (!models.model(name)->current())
        est::log::warning("No versions of servable {} found under base path {}", name,
                          models.model(name)->base_path());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "est-serve: %s\n", error.what());
    return 1;
  }

  std::unique_ptr<httplib::Server> server;
  if (ssl_cert_file.empty())
    server = std::make_unique<httplib::Server>();
  else
    server = std::make_unique<httplib::SSLServer>(ssl_cert_file.c_str(), ssl_key_file.c_str());
  if (!server->is_valid()) {
    std::fprintf(stderr, "est-serve: cannot set up the server (TLS certificate or key?)\n");
    return 1;
  }
  server->new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
  // Answers leave at once: with Nagle's algorithm, the body that follows the headers on a
  // kept-alive connection waited for the client's delayed ACK (40 ms and more a request).
  server->set_tcp_nodelay(true);
  // A kept-alive connection's requests are served one after another on the thread that took the
  // connection, but Debian's cpp-httplib (0.11) closes it after 5: the client reconnects and its
  // next request waits for the new connection to be accepted and handed to a thread (one request
  // in five paid for it). 100, the default of later cpp-httplib releases, still hands the
  // threads round when more connections than threads are open.
  server->set_keep_alive_max_count(100);
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
  // library): with more clients connecting at once, their SYNs are dropped and retried a second
  // later (serving_bench's p99 at 8 clients was 1 s). Linux raises the backlog of a listening
  // socket when listen() is called again, so the listening socket is kept for that.
  int listening_socket = -1;
  server->set_socket_options([&listening_socket](socket_t socket) {
    httplib::default_socket_options(socket);
    listening_socket = socket;
  });
  server->set_payload_max_length(max_request_bytes);
  server->set_read_timeout(std::chrono::milliseconds(timeout_ms));
  server->set_write_timeout(std::chrono::milliseconds(timeout_ms));
  // Requests being answered (their bodies read or their answers computed), for the shutdown.
  std::atomic<int> in_flight{0};
  struct InFlight {
    std::atomic<int>& count;
    explicit InFlight(std::atomic<int>& count) : count(count) { ++count; }
    ~InFlight() { --count; }
  };
  auto answer = [&models, &batcher](const httplib::Request& request, httplib::Response& response,
                                    const std::string& body) {
    const int64_t start = est::serving::now_micros();
    est::serving::RestResponse result =
        est::serving::handle_rest(models, request.method, request.path, body, batcher.get());
    if (auto labels = est::serving::rest_request_labels(request.path))
      est::serving::record_request(labels->model_name,
                                   result.error ? est::status_code_name(*result.error) : "OK",
                                   labels->api, "REST", est::serving::micros_since(start));
    response.status = result.status;
    response.body = std::move(result.body);  // set_content would copy it
    response.set_header("Content-Type", "application/json");
  };
  // Every path (a decoded %0A included, which '.' would not match) goes to handle_rest.
  server->Get(R"(/[\s\S]*)", [&answer, &in_flight, &metrics_path](const httplib::Request& request,
                                                                  httplib::Response& response) {
    InFlight counted(in_flight);
    if (!metrics_path.empty() && request.path == metrics_path)  // Prometheus's scrape
      response.set_content(est::serving::serving_metrics().exposition(), "text/plain");
    else
      answer(request, response, "");
  });
  // The body is the JSON request whatever its Content-Type, as TF Serving reads it: curl -d
  // sends application/x-www-form-urlencoded, which cpp-httplib would otherwise parse as a form
  // (refused over 8 KB). A multipart form is no JSON request: its parts are read and refused.
  server->Post(R"(/[\s\S]*)", [&answer, &in_flight, max_request_bytes](
                                  const httplib::Request& request, httplib::Response& response,
                                  const httplib::ContentReader& read) {
    InFlight counted(in_flight);
    std::string body;
    bool read_all = false;  // as JSON
    if (request.is_multipart_form_data()) {
      if (read([](const httplib::MultipartFormData&) { return true; },
               [](const char*, size_t) { return true; })) {
        response.status = 400;
        response.set_content(
            "{\"error\": \"JSON Parse error: the body is a multipart/form-data form; send the "
            "JSON request itself (curl --data-binary @request.json)\"}",
            "application/json");
      }
    } else {
      const std::string declared = request.get_header_value("Content-Length");
      size_t length = 0;
      std::from_chars(declared.data(), declared.data() + declared.size(), length);
      // One allocation rather than one per doubling (at most 1 MB before the bytes arrive).
      body.reserve(std::min<size_t>({length, max_request_bytes, size_t{1} << 20}));
      read_all = read([&body](const char* data, size_t size) {
        body.append(data, size);
        return true;
      });
    }
    if (!read_all) {
      if (response.status < 400) response.status = 400;  // 413 when too large
      return;
    }
    answer(request, response, body);
  });
  server->set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    const std::string reason =
        response.status == 413 ? "the request body is too large" : "the request could not be read";
    response.set_content("{\"error\": \"" + reason + " (" + request.method + ")\"}",
                         "application/json");
  });

  if (rest_port != 0) {
    if (!server->bind_to_port(address.c_str(), rest_port)) {
      std::fprintf(stderr,
                   "est-serve: cannot bind %s:%d (in use, or not an address of this host)\n",
                   address.c_str(), rest_port);
      return 1;
    }
    if (listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
  }
#if EST_SERVE_GRPC
  std::unique_ptr<est::serving::GrpcServer> grpc_server;
  if (port != 0) {
    try {
      grpc_server = std::make_unique<est::serving::GrpcServer>(
          models, batcher.get(),
          est::serving::GrpcServerOptions{
              .address = address, .port = port, .max_threads = grpc_max_threads});
    } catch (const std::exception& error) {
      std::fprintf(stderr, "est-serve: %s\n", error.what());
      return 1;
    }
    std::printf("Running gRPC ModelServer at %s:%d ...\n", address.c_str(), grpc_server->port());
  }
#endif
  if (rest_port != 0)
    std::printf("Exporting HTTP/REST API at:%s:%d ...\n", address.c_str(), rest_port);
  std::fflush(stdout);

  std::mutex mutex;
  std::condition_variable stopped;
  bool stopping = false;
  std::thread poller([&] {
    if (poll_seconds <= 0) return;  // TF Serving: 0 polls once, at startup
    std::unique_lock lock(mutex);
    while (!stopped.wait_for(lock, std::chrono::duration<double>(poll_seconds),
                             [&] { return stopping; })) {
      lock.unlock();
      models.poll();
      lock.lock();
    }
  });
  std::thread config_poller([&] {
    if (config_poll_seconds <= 0 || model_config_file.empty()) return;
    std::unique_lock lock(mutex);
    while (!stopped.wait_for(lock, std::chrono::duration<double>(config_poll_seconds),
                             [&] { return stopping; })) {
      lock.unlock();
      reload_config(models, model_config_file, applied_config);
      lock.lock();
    }
  });
  // SIGTERM: requests in flight are given --rest_api_timeout_in_ms to finish, then abandoned.
  bool listening = true, stop_requested = false;
  std::thread signal_waiter([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (signal == SIGUSR1) return;
    server->stop();
    std::unique_lock lock(mutex);
    stop_requested = true;
    stopped.notify_all();
    if (!stopped.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                          [&] { return !listening; })) {
      std::fprintf(stderr,
                   "est-serve: %d request(s) still in flight %d ms (--rest_api_timeout_in_ms) "
                   "after the signal to stop: exiting without their answers\n",
                   in_flight.load(), timeout_ms);
      std::fflush(stdout);
      std::_Exit(1);
    }
  });
  if (rest_port != 0) {
    server->listen_after_bind();
  } else {
    std::unique_lock lock(mutex);
    stopped.wait(lock, [&] { return stop_requested; });
  }
  {
    std::lock_guard lock(mutex);
    listening = false;
  }
  stopped.notify_all();
  pthread_kill(signal_waiter.native_handle(), SIGUSR1);  // when listen ended on its own
  signal_waiter.join();
#if EST_SERVE_GRPC
  if (grpc_server) grpc_server->shutdown(timeout_ms);
#endif
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  stopped.notify_all();
  poller.join();
  config_poller.join();
  return 0;
}
