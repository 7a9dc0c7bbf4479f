// CoordinationClient: the calls, the heartbeat thread, and cancelling calls in progress when
// the job fails.
#include "distribute/net/coordination_client.h"

#include <fmt/format.h>

#include <random>

#include "coordination.grpc.pb.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {

struct CoordinationClient::Stub {
  std::unique_ptr<rpc::Coordination::Stub> stub;
};

namespace {

using Clock = std::chrono::steady_clock;

int64_t milliseconds(std::chrono::milliseconds duration) { return duration.count(); }

}  // namespace

CoordinationClient::CoordinationClient(Options options)
    : options_(std::move(options)),
      channel_(make_channel(options_.leader_address, options_.tls)),
      stub_(std::make_unique<Stub>(Stub{rpc::Coordination::NewStub(channel_)})) {
  std::random_device random;
  incarnation_ = (uint64_t{random()} << 32) ^ random();
}

CoordinationClient::~CoordinationClient() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  }
  stop_cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
}

std::optional<JobStatus> CoordinationClient::job_error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void CoordinationClient::check() const {
  if (!has_error()) return;
  if (auto error = job_error()) throw_if_error(*error);
}

std::set<std::string> CoordinationClient::finished_tasks() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

void CoordinationClient::fail(JobStatus error) {
  {
    std::lock_guard lock(mutex_);
    if (error_) return;
    if (error.code == StatusCode{}) error.code = StatusCode::kUnknown;
    error_ = error;
    has_error_.store(true, std::memory_order_release);
    for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  }
  if (error.origin != options_.task)
    log::error("{}: the job has failed: {}", options_.task, error.message);
}

template <class Call>
grpc::Status CoordinationClient::call(const char* what, Clock::time_point deadline,
                                      bool wait_for_ready, Call&& rpc) {
  check();
  grpc::ClientContext context;
  prepare_context(context, options_.token, deadline);
  context.set_wait_for_ready(wait_for_ready);
  {
    std::lock_guard lock(mutex_);
    in_flight_.insert(&context);
  }
  grpc::Status status = rpc(context);
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(&context);
  }
  if (status.error_code() == grpc::StatusCode::CANCELLED) check();  // the job failed meanwhile
  if (!status.ok()) throw_rpc_failure(what, status);
  return status;
}

void CoordinationClient::throw_rpc_failure(const char* what, const grpc::Status& status) const {
  std::string where = fmt::format("{} (the coordination service) at {}", options_.leader_task,
                                  options_.leader_address);
  switch (status.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
      throw PermissionDeniedError(
          fmt::format("{} refused {}'s {}: {}", where, options_.task, what, status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw DeadlineExceededError(fmt::format("{}'s {} got no answer from {} in time",
                                              options_.task, what, where));
    default:
      throw UnavailableError(fmt::format("{}'s {} failed: {} is unreachable ({}: {})",
                                         options_.task, what, where,
                                         static_cast<int>(status.error_code()),
                                         status.error_message()));
  }
}

RendezvousResult CoordinationClient::register_task(const TaskRegistration& registration,
                                                   std::chrono::milliseconds timeout) {
  rpc::RegisterRequest request;
  request.set_task(registration.task);
  request.set_incarnation(incarnation_);
  request.set_cluster_fingerprint(registration.cluster_fingerprint);
  request.set_data_address(registration.data_address);
  request.set_host(registration.host);
  request.set_pid(registration.pid);
  request.set_timeout_ms(milliseconds(timeout));
  rpc::RegisterResponse response;
  try {
    // The service answers at `timeout` when tasks are missing (naming them); the call itself
    // waits a little longer, so that only an unreachable service runs into its deadline.
    call("registration", Clock::now() + timeout + std::chrono::seconds(2), true, [&](grpc::ClientContext& context) {
      return stub_->stub->Register(&context, request, &response);
    });
  } catch (const DeadlineExceededError&) {
    throw DeadlineExceededError(fmt::format(
        "{} could not reach the coordination service of {} at {} within {} s "
        "(session_creation_timeout_secs): start that task, check TF_CONFIG's address, or raise "
        "the timeout",
        options_.task, options_.leader_task, options_.leader_address,
        milliseconds(timeout) / 1000.0));
  }
  RendezvousResult result{.status = from_proto(response.status()),
                          .job_incarnation = response.job_incarnation()};
  throw_if_error(result.status);
  for (const rpc::TaskInfo& info : response.tasks())
    result.tasks.push_back({.task = info.task(),
                            .incarnation = info.incarnation(),
                            .data_address = info.data_address(),
                            .host = info.host(),
                            .pid = info.pid()});
  {
    std::lock_guard lock(mutex_);
    if (!heartbeats_.joinable()) heartbeats_ = std::thread([this] { heartbeat_loop(); });
  }
  return result;
}

std::optional<JobStatus> CoordinationClient::poll_now(std::chrono::milliseconds grace) {
  Clock::time_point until = Clock::now() + grace;
  for (;;) {
    if (auto error = job_error()) return error;
    rpc::HeartbeatRequest request;
    request.set_task(options_.task);
    request.set_incarnation(incarnation_);
    rpc::HeartbeatResponse response;
    grpc::ClientContext context;
    prepare_context(context, options_.token, Clock::now() + std::chrono::milliseconds(500));
    grpc::Status status = stub_->stub->Heartbeat(&context, request, &response);
    if (status.ok()) {
      JobStatus job = from_proto(response.status());
      if (!job.ok()) {
        fail(job);
        return job;
      }
    } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // The service itself is gone (its port refuses connections): the leader died, and the
      // peer that just closed its connection is most likely stopping because of it.
      JobStatus lost = JobStatus::error(
          StatusCode::kUnavailable,
          fmt::format("{} at {} (the coordination service) stopped responding: {}",
                      options_.leader_task, options_.leader_address, status.error_message()),
          options_.leader_task);
      fail(lost);
      return lost;
    }
    if (Clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void CoordinationClient::heartbeat_loop() {
  Clock::time_point last_contact = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    rpc::HeartbeatRequest request;
    request.set_task(options_.task);
    request.set_incarnation(incarnation_);
    rpc::HeartbeatResponse response;
    grpc::ClientContext context;
    prepare_context(context, options_.token, Clock::now() + options_.heartbeat_interval * 2);
    grpc::Status status = stub_->stub->Heartbeat(&context, request, &response);
    Clock::time_point now = Clock::now();
    if (status.ok()) {
      last_contact = now;
      JobStatus job = from_proto(response.status());
      {
        std::lock_guard guard(mutex_);
        finished_ = {response.finished().begin(), response.finished().end()};
      }
      if (!job.ok()) fail(job);
    } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      fail(JobStatus::error(StatusCode::kPermissionDenied,
                            fmt::format("{} refused {}'s heartbeat: {}", options_.leader_task,
                                        options_.task, status.error_message())));
    } else if (now - last_contact > options_.heartbeat_timeout) {
      fail(JobStatus::error(
          StatusCode::kUnavailable,
          fmt::format("{} at {} (the coordination service) stopped responding: no answer to "
                      "{}'s heartbeats for {:.1f} s ({})",
                      options_.leader_task, options_.leader_address, options_.task,
                      std::chrono::duration<double>(now - last_contact).count(),
                      status.error_message()),
          options_.leader_task));
    }
    lock.lock();
    if (error_) break;  // nothing more to learn
    stop_cv_.wait_for(lock, options_.heartbeat_interval, [&] { return stopping_; });
  }
}

void CoordinationClient::barrier(const std::string& id, std::chrono::milliseconds timeout) {
  rpc::BarrierRequest request;
  request.set_barrier_id(id);
  request.set_task(options_.task);
  request.set_timeout_ms(milliseconds(timeout));
  rpc::BarrierResponse response;
  call("barrier", Clock::now() + timeout + std::chrono::seconds(2), false,
       [&](grpc::ClientContext& context) {
         return stub_->stub->Barrier(&context, request, &response);
       });
  throw_if_error(from_proto(response.status()));
}

void CoordinationClient::set(const std::string& key, const std::string& value) {
  rpc::KeyValueSetRequest request;
  request.set_key(key);
  request.set_value(value);
  rpc::KeyValueSetResponse response;
  call("key-value set", Clock::now() + options_.heartbeat_timeout, false,
       [&](grpc::ClientContext& context) {
         return stub_->stub->KeyValueSet(&context, request, &response);
       });
  throw_if_error(from_proto(response.status()));
}

std::string CoordinationClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  rpc::KeyValueGetRequest request;
  request.set_key(key);
  request.set_timeout_ms(milliseconds(timeout));
  rpc::KeyValueGetResponse response;
  call("key-value get", Clock::now() + timeout + std::chrono::seconds(2), false,
       [&](grpc::ClientContext& context) {
         return stub_->stub->KeyValueGet(&context, request, &response);
       });
  throw_if_error(from_proto(response.status()));
  return response.value();
}

void CoordinationClient::report_error(const JobStatus& error) noexcept {
  try {
    rpc::ReportErrorRequest request;
    request.set_task(options_.task);
    JobStatus reported = error;
    if (reported.origin.empty()) reported.origin = options_.task;
    to_proto(reported, *request.mutable_error());
    rpc::ReportErrorResponse response;
    grpc::ClientContext context;
    prepare_context(context, options_.token, Clock::now() + std::chrono::seconds(2));
    stub_->stub->ReportError(&context, request, &response);
    fail(reported);
  } catch (...) {
  }
}

void CoordinationClient::shutdown(std::chrono::milliseconds timeout) {
  rpc::ShutdownRequest request;
  request.set_task(options_.task);
  request.set_timeout_ms(milliseconds(timeout));
  rpc::ShutdownResponse response;
  call("shutdown", Clock::now() + timeout + std::chrono::seconds(2), false,
       [&](grpc::ClientContext& context) {
         return stub_->stub->Shutdown(&context, request, &response);
       });
  throw_if_error(from_proto(response.status()));
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
}

}  // namespace est::distribute
