// est-serve's gRPC API: TF Serving's tensorflow.serving.PredictionService (Predict, Classify,
// Regress, MultiInference, GetModelMetadata) and ModelService (GetModelStatus,
// HandleReloadConfigRequest) over a ServerCore, on the messages of export/grpc/proto (TF
// Serving's and TensorFlow's .proto files, so any TF Serving client's stubs talk to it).
// Errors are gRPC statuses with TF Serving's codes and messages: NOT_FOUND for an unknown model
// or version, INVALID_ARGUMENT for a bad request (naming the input and what is wrong),
// FAILED_PRECONDITION for an unknown signature; a request the server cannot even parse gets
// gRPC's own status for it, as from TF Serving, and never stops the server.
#pragma once

#include <memory>
#include <string>

#include "export/batcher.h"
#include "export/server_core.h"

namespace est::serving {

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8500;            // 0: any free port (port() says which)
  int max_threads = 0;        // --grpc_max_threads (Predict then synchronous); 0: gRPC's default
  int max_message_bytes = 0;  // 0: no limit below gRPC's 2 GB
};

class GrpcServer {
 public:
  // Starts serving `core` (UnavailableError when the address cannot be bound). `batcher` may be
  // null.
  GrpcServer(ServerCore& core, Batcher* batcher, const GrpcServerOptions& options);
  ~GrpcServer();
  int port() const { return port_; }
  // Stops accepting requests; those in flight get until `deadline_ms` to finish.
  void shutdown(int deadline_ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace est::serving
