// CoordinationServer: the coordination service over gRPC, run by the job's leader (the chief,
// or worker 0 when there is no chief) on its TF_CONFIG address, and only there.
//
// Each RPC checks the job token first, then calls CoordinationState; blocking calls (register,
// barrier, get, shutdown) hold a server thread while they wait, bounded by their deadline. A
// watchdog thread declares silent tasks dead several times a second. Stopping the server lets
// calls in progress finish for a short grace period, so that tasks in the shutdown barrier get
// their answer before the leader's process exits.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "distribute/net/coordination_state.h"
#include "distribute/net/grpc_util.h"

namespace est::distribute {

class CoordinationServer {
 public:
  struct Options {
    std::string address;  // host:port to listen on (port 0: any free port)
    std::string token;
    TlsOptions tls;
    CoordinationState::Options state;
  };
  // Listens at once: UnavailableError naming the address when it cannot be bound.
  explicit CoordinationServer(Options options);
  ~CoordinationServer();
  CoordinationServer(const CoordinationServer&) = delete;
  CoordinationServer& operator=(const CoordinationServer&) = delete;

  CoordinationState& state() { return *state_; }
  int port() const { return port_; }
  // Stops serving; calls in progress get up to `grace` to finish, and after a failure the tasks
  // that have not yet been told the job's error get up to `grace` to ask. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

 private:
  class Service;
  std::unique_ptr<CoordinationState> state_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::thread watchdog_;
};

}  // namespace est::distribute
