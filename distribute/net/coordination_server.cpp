// The Coordination gRPC service: token check, then CoordinationState.
#include "distribute/net/coordination_server.h"

#include <fmt/format.h>

#include "coordination.grpc.pb.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

// The earlier of the call's own deadline and `timeout_ms` from now (0 or less: the call's).
SteadyTime deadline_of(const grpc::ServerContext& context, int64_t timeout_ms) {
  auto system_deadline = context.deadline();
  auto now_system = std::chrono::system_clock::now();
  auto now = std::chrono::steady_clock::now();
  SteadyTime deadline = now + std::chrono::hours(24 * 365);
  if (system_deadline != std::chrono::system_clock::time_point::max())
    deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         system_deadline - now_system);
  if (timeout_ms > 0) deadline = std::min(deadline, now + std::chrono::milliseconds(timeout_ms));
  return deadline;
}

}  // namespace

class CoordinationServer::Service final : public rpc::Coordination::Service {
 public:
  Service(CoordinationState& state, std::string token)
      : state_(state), token_(std::move(token)) {}

  grpc::Status Register(grpc::ServerContext* context, const rpc::RegisterRequest* request,
                        rpc::RegisterResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    TaskRegistration registration{.task = request->task(),
                                  .incarnation = request->incarnation(),
                                  .cluster_fingerprint = request->cluster_fingerprint(),
                                  .data_address = request->data_address(),
                                  .host = request->host(),
                                  .pid = request->pid()};
    RendezvousResult result =
        state_.register_task(registration, deadline_of(*context, request->timeout_ms()));
    to_proto(result.status, *response->mutable_status());
    response->set_job_incarnation(result.job_incarnation);
    for (const TaskRegistration& task : result.tasks) {
      rpc::TaskInfo* info = response->add_tasks();
      info->set_task(task.task);
      info->set_data_address(task.data_address);
      info->set_host(task.host);
      info->set_pid(task.pid);
      info->set_incarnation(task.incarnation);
    }
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext* context, const rpc::HeartbeatRequest* request,
                         rpc::HeartbeatResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    HeartbeatResult result = state_.heartbeat(request->task(), request->incarnation());
    to_proto(result.status, *response->mutable_status());
    for (const std::string& task : result.finished) response->add_finished(task);
    return grpc::Status::OK;
  }

  grpc::Status Barrier(grpc::ServerContext* context, const rpc::BarrierRequest* request,
                       rpc::BarrierResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    JobStatus status = state_.barrier(request->barrier_id(), request->task(),
                                      deadline_of(*context, request->timeout_ms()));
    to_proto(status, *response->mutable_status());
    return grpc::Status::OK;
  }

  grpc::Status ReportError(grpc::ServerContext* context, const rpc::ReportErrorRequest* request,
                           rpc::ReportErrorResponse* /*response*/) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    state_.report_error(request->task(), from_proto(request->error()));
    return grpc::Status::OK;
  }

  grpc::Status KeyValueSet(grpc::ServerContext* context, const rpc::KeyValueSetRequest* request,
                           rpc::KeyValueSetResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    state_.set(request->key(), request->value());
    to_proto({}, *response->mutable_status());
    return grpc::Status::OK;
  }

  grpc::Status KeyValueGet(grpc::ServerContext* context, const rpc::KeyValueGetRequest* request,
                           rpc::KeyValueGetResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    std::string value;
    JobStatus status =
        state_.get(request->key(), deadline_of(*context, request->timeout_ms()), value);
    to_proto(status, *response->mutable_status());
    response->set_value(value);
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext* context, const rpc::ShutdownRequest* request,
                        rpc::ShutdownResponse* response) override {
    if (auto denied = check_token(*context, token_); !denied.ok()) return denied;
    JobStatus status =
        state_.shutdown(request->task(), deadline_of(*context, request->timeout_ms()));
    to_proto(status, *response->mutable_status());
    return grpc::Status::OK;
  }

 private:
  CoordinationState& state_;
  std::string token_;
};

CoordinationServer::CoordinationServer(Options options)
    : state_(std::make_unique<CoordinationState>(std::move(options.state))),
      service_(std::make_unique<Service>(*state_, options.token)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, server_credentials(options.tls), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(kMaxRpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxRpcMessageBytes);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0)
    throw UnavailableError(fmt::format(
        "the coordination service cannot listen on {} (TF_CONFIG's address of this task): the "
        "port is in use or the host is not this machine's",
        options.address));
  watchdog_ = std::thread([this] {
    while (!stopping_.load()) {
      state_->check_heartbeats();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
}

CoordinationServer::~CoordinationServer() { stop(std::chrono::milliseconds(0)); }

void CoordinationServer::stop(std::chrono::milliseconds grace) {
  if (stopping_.exchange(true)) return;
  if (watchdog_.joinable()) watchdog_.join();
  // Tasks still in the shutdown barrier get their answer first, and after a failure every task
  // gets the job's error (up to `grace`); then every call still waiting is woken with an
  // error, so that the server's threads can return.
  auto until = std::chrono::steady_clock::now() + grace;
  while (!state_->all_shut_down() && !state_->error_reached_every_task() &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  state_->close(JobStatus::error(StatusCode::kUnavailable,
                                 fmt::format("the coordination service on port {} stopped: the "
                                             "leader's process is exiting",
                                             port_)));
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
}

}  // namespace est::distribute
