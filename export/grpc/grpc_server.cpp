// The gRPC server of grpc_server.h: both services on one port. Followed: TF Serving's
// model_servers/server.cc (the maximum message size raised to 2 GB - 1, --grpc_max_threads
// as the resource quota's thread limit).
#include "export/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "export/grpc/services.h"

namespace est::serving {

struct GrpcServer::Impl {
  std::unique_ptr<grpc::Service> prediction;
  std::unique_ptr<grpc::Service> model;
  std::unique_ptr<grpc::Server> server;
};

GrpcServer::GrpcServer(ServerCore& core, Batcher* batcher, const GrpcServerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  // A thread quota bounds the synchronous API's threads only: with one, Predict is served there
  // too, as TF Serving serves it; without, on the callback API (cheaper a request).
  impl_->prediction = make_prediction_service(core, batcher, options.max_threads <= 0);
  impl_->model = make_model_service(core);
  grpc::ServerBuilder builder;
  const std::string address = fmt::format("{}:{}", options.address, options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(impl_->prediction.get());
  builder.RegisterService(impl_->model.get());
  builder.SetMaxMessageSize(options.max_message_bytes > 0 ? options.max_message_bytes
                                                          : std::numeric_limits<int>::max());
  if (options.max_threads > 0) {
    grpc::ResourceQuota quota("est-serve");
    quota.SetMaxThreads(options.max_threads);
    builder.SetResourceQuota(quota);
  }
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port_ == 0)
    throw UnavailableError(fmt::format(
        "cannot serve gRPC on {} (the port in use, or not an address of this host)", address));
}

GrpcServer::~GrpcServer() {
  if (impl_->server) shutdown(0);
}

void GrpcServer::shutdown(int deadline_ms) {
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(deadline_ms));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace est::serving
