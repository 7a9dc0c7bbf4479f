// est-serve: serves the newest export under --model_base_path with TensorFlow Serving's REST
// API (export/rest_api.h), so that TF Serving clients keep working. Flags follow
// tensorflow_model_server's where they exist (--model_name, --model_base_path,
// --rest_api_timeout_in_ms, --file_system_poll_wait_seconds, --rest_api_num_threads); --port is
// the REST port (0: any free port), --address the one address it binds (default loopback).
//
// The server prints "Exporting HTTP/REST API at:<address>:<port> ..." once it listens (the
// line TF Serving logs), polls the base path for newer versions on a thread of its own and
// swaps them in without dropping requests (export/servable.h). Bodies over --max_request_bytes
// are refused (413) before they are read, whatever their Content-Type (TF Serving reads any body
// as JSON); every connection has read and write timeouts of --rest_api_timeout_in_ms, and on
// SIGTERM or SIGINT requests in flight get that long to finish before the process exits
// (status 1 when it abandoned some).
// --ssl_cert_file and --ssl_key_file serve HTTPS instead; --enable_batching runs concurrent
// predict requests as one batch (export/batcher.h; --max_batch_size, --batch_timeout_micros).
#include <httplib.h>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <atomic>
#include <chrono>
#include <condition_variable>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "export/rest_api.h"
#include "export/servable.h"
#include "ops/error.h"
#include "ops/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"est-serve: TensorFlow Serving's REST API for est exports", "est-serve"};
  std::string model_base_path, model_name = "default", address = "127.0.0.1";
  std::string ssl_cert_file, ssl_key_file;
  int port = 8501, timeout_ms = 30000, num_threads = 8;
  double poll_seconds = 1;
  size_t max_request_bytes = 16u << 20;
  bool enable_batching = false;
  int64_t max_batch_size = 32, batch_timeout_micros = 1000;
  app.add_option("--model_base_path", model_base_path,
                 "directory of numbered versions (export_saved_model's export_dir_base)")
      ->required();
  app.add_option("--model_name", model_name, "the NAME in /v1/models/NAME")->capture_default_str();
  app.add_option("--port,--rest_api_port", port, "REST port; 0 picks a free one")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
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
                 "how often to look for a new version")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max_request_bytes", max_request_bytes, "larger bodies are refused (413)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--enable_batching", enable_batching,
               "run concurrent predict requests together (TF Serving's batching)");
  app.add_option("--max_batch_size", max_batch_size, "rows per batch, with --enable_batching")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch_timeout_micros", batch_timeout_micros,
                 "how long a batch waits for more requests, with --enable_batching")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ssl_cert_file", ssl_cert_file, "PEM certificate: serve HTTPS");
  app.add_option("--ssl_key_file", ssl_key_file, "PEM private key of --ssl_cert_file");
  CLI11_PARSE(app, argc, argv);
  if (ssl_cert_file.empty() != ssl_key_file.empty()) {
    std::fprintf(stderr, "est-serve: give both --ssl_cert_file and --ssl_key_file, or neither\n");
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

  est::serving::ModelManager models(model_name, model_base_path);
  try {
    if (!models.poll() && !models.current())
      est::log::warning("No versions of servable {} found under base path {}", model_name,
                        model_base_path);
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
  std::unique_ptr<est::serving::Batcher> batcher;
  if (enable_batching)
    batcher = std::make_unique<est::serving::Batcher>(est::serving::Batcher::Options{
        .max_batch_size = max_batch_size,
        .batch_timeout = std::chrono::microseconds(batch_timeout_micros)});
  // Requests being answered (their bodies read or their answers computed), for the shutdown.
  std::atomic<int> in_flight{0};
  struct InFlight {
    std::atomic<int>& count;
    explicit InFlight(std::atomic<int>& count) : count(count) { ++count; }
    ~InFlight() { --count; }
  };
  auto answer = [&models, &batcher](const httplib::Request& request, httplib::Response& response,
                                    const std::string& body) {
    est::serving::RestResponse result =
        est::serving::handle_rest(models, request.method, request.path, body, batcher.get());
    response.status = result.status;
    response.set_content(result.body, "application/json");
  };
  // Every path (a decoded %0A included, which '.' would not match) goes to handle_rest.
  server->Get(R"(/[\s\S]*)",
              [&answer, &in_flight](const httplib::Request& request, httplib::Response& response) {
                InFlight counted(in_flight);
                answer(request, response, "");
              });
  // The body is the JSON request whatever its Content-Type, as TF Serving reads it: curl -d
  // sends application/x-www-form-urlencoded, which cpp-httplib would otherwise parse as a form
  // (refused over 8 KB). A multipart form is no JSON request: its parts are read and refused.
  server->Post(R"(/[\s\S]*)", [&answer, &in_flight](const httplib::Request& request,
                                                    httplib::Response& response,
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

  int bound = port;
  if (port == 0) {
    bound = server->bind_to_any_port(address.c_str());
  } else if (!server->bind_to_port(address.c_str(), port)) {
    bound = -1;
  }
  if (bound < 0) {
    std::fprintf(stderr, "est-serve: cannot bind %s:%d (in use, or not an address of this host)\n",
                 address.c_str(), port);
    return 1;
  }
  if (listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
  std::printf("Exporting HTTP/REST API at:%s:%d ...\n", address.c_str(), bound);
  std::fflush(stdout);

  std::mutex mutex;
  std::condition_variable stopped;
  bool stopping = false;
  std::thread poller([&] {
    std::unique_lock lock(mutex);
    while (!stopped.wait_for(lock, std::chrono::duration<double>(poll_seconds),
                             [&] { return stopping; })) {
      lock.unlock();
      models.poll();
      lock.lock();
    }
  });
  // SIGTERM: requests in flight are given --rest_api_timeout_in_ms to finish, then abandoned.
  bool listening = true;
  std::thread signal_waiter([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (signal == SIGUSR1) return;
    server->stop();
    std::unique_lock lock(mutex);
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
  server->listen_after_bind();
  {
    std::lock_guard lock(mutex);
    listening = false;
  }
  stopped.notify_all();
  pthread_kill(signal_waiter.native_handle(), SIGUSR1);  // when listen ended on its own
  signal_waiter.join();
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  stopped.notify_all();
  poller.join();
  return 0;
}
