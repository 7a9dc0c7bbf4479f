// PsServer: the accept loop, one thread per worker connection, and the requests.
#include "distribute/ps/ps_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "distribute/cluster/multi_worker_util.h"
#include "distribute/cluster/tf_config.h"
#include "distribute/net/step_profile.h"
#include "distribute/ps/ps_handshake.h"
#include "distribute/ps/ps_heartbeat.h"
#include "nn/context_control.h"
#include "nn/model_context.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";

std::string peer_address(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (peer.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (peer.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(&peer);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    port = ntohs(in->sin6_port);
  }
  return fmt::format("{}:{}", text, port);
}

// PsServerOptions::local_processes when 0: the tasks TF_CONFIG places on this host, else 1.
int local_processes_from_environment() {
  std::optional<std::string> text = tf_config_from_environment();
  if (!text) return 1;
  try {
    TfConfig config = parse_tf_config(*text);
    if (config.cluster.empty()) return 1;
    return num_local_tasks(config.cluster, config.task, this_host_names());
  } catch (const InvalidArgumentError&) {
    return 1;  // whoever reads it for the job reports it; the count only sizes the teams
  }
}

PsReply error_reply(StatusCode code, std::string message) {
  PsReply reply;
  reply.code = code;
  reply.message = std::move(message);
  return reply;
}

}  // namespace

PsServer::PsServer(PsServerOptions options) : options_(std::move(options)) {
  auto [host, port] = split_host_port(options_.address);
  host_ = host;
  listen_fd_ = listen_tcp(host, port, fmt::format("ps task {}", options_.task_index));
  port_ = bound_port(listen_fd_);
  int local =
      options_.local_processes > 0 ? options_.local_processes : local_processes_from_environment();
  serving_threads_ = ops::threads_for_local_processes(local);
  acceptor_ = std::thread([this] { accept_loop(); });
}

PsServer::~PsServer() { stop(); }

std::string PsServer::address() const {
  bool v6 = host_.find(':') != std::string::npos;
  return v6 ? fmt::format("[{}]:{}", host_, port_) : fmt::format("{}:{}", host_, port_);
}

void PsServer::set_optimizer(nn::optim::Optimizer optimizer) {
  std::lock_guard lock(mutex_);
  options_.optimizer = std::move(optimizer);
}

void PsServer::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(threads_mutex_);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void PsServer::join(std::chrono::milliseconds timeout) {
  std::optional<JobStatus> status;
  {
    std::unique_lock lock(mutex_);
    if (!ended_cv_.wait_for(lock, timeout, [&] { return end_.has_value(); }))
      throw DeadlineExceededError(
          fmt::format("{}: the job did not end within {} s", name(),
                      std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
    status = end_;
    // Let the last replies leave before the connections close; after a failure, give the
    // training tasks still connected a moment to ask and hear the error (each exits then).
    auto linger = status->ok() ? std::chrono::milliseconds(100) : std::chrono::seconds(3);
    ended_cv_.wait_for(lock, linger, [&] { return !status->ok() && connected_.empty(); });
  }
  stop();
  if (!status->ok()) throw_error(status->code, status->message);
}

std::vector<std::string> PsServer::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const std::string& n : store_.names())
    if (n != kGlobalStep || holds_global_step_) names.push_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

void PsServer::end(JobStatus status) {
  {
    std::lock_guard lock(mutex_);
    if (end_) return;
    end_ = std::move(status);
  }
  ended_cv_.notify_all();
  tokens_cv_.notify_all();
}

void PsServer::accept_loop() {
  while (!stopping_) {
    pollfd waiting{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (::poll(&waiting, 1, 100) <= 0) continue;
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (fd < 0) continue;
    tune_socket(fd);
    std::string from = peer_address(peer);
    auto link = std::make_shared<Link>(fd, from);
    std::lock_guard lock(threads_mutex_);
    connections_.emplace_back([this, link, from] {
      ops::set_num_threads(serving_threads_);
      std::optional<PsPeer> client = accept_ps_client(*link, options_.token, from);
      if (!client) return;
      if (client->kind == PsConnection::kHeartbeat)
        answer_heartbeats(*link, stopping_);
      else
        serve(link, client->name);
    });
  }
}

void PsServer::serve(std::shared_ptr<Link> link, std::string client) {
  HealthCheck health = [this](bool) -> std::optional<JobStatus> {
    if (stopping_) return JobStatus::error(StatusCode::kCancelled, "the ps task is stopping");
    return std::nullopt;
  };
  const std::string what = fmt::format("serving {}", client);
  log::debug("{}: {} connected", name(), client);
  {
    std::lock_guard lock(mutex_);
    connected_.insert(client);
    lost_.erase(client);
  }
  // Gradients this connection staged for its next push (kStage), applied with it.
  std::vector<NamedTensor> staged;
  std::string frame, reply_bytes;  // reused from request to request (ps_wire.h)
  step_profile::note_thread("ps_serve " + client);
  try {
    for (;;) {
      // Decoded straight out of a shared-memory link's buffer (else out of `frame`).
      PsRequest request;
      receive_frame(*link, health, what, frame, [&](std::string_view bytes) {
        step_profile::Scope receiving(step_profile::kPsReceive);  // from the frame's arrival
        request = decode_request(bytes, client);
      });
      trim_frame_buffer(frame);
      if (request.kind == PsRequestKind::kStage) {
        std::move(request.tensors.begin(), request.tensors.end(), std::back_inserter(staged));
        continue;
      }
      if (request.kind == PsRequestKind::kDiscardStaged) {
        staged.clear();
        continue;
      }
      if (request.kind == PsRequestKind::kPushPull && !staged.empty()) {
        std::move(request.tensors.begin(), request.tensors.end(), std::back_inserter(staged));
        request.tensors = std::move(staged);
        staged.clear();
      }
      // A pull's values are encoded under the task's lock, straight from the variables: into
      // the worker's shared-memory channel when the frame fits and the channel has room now
      // (sent: the lock is never held waiting for a worker to read), else into reply_bytes
      // (encoded), which leave once the lock is released.
      PsReply reply;
      bool sent = false, encoded = false;
      auto reply_now = [&](const PsReply& values) {
        sent = send_in_place(*link, values, health, what, /*wait=*/false) > 0;
        if (!sent) encode(values, reply_bytes);
        encoded = !sent;
      };
      try {
        reply = handle(request, client, reply_now);
      } catch (const Error& error) {
        if (sent) throw;  // the reply left; what failed after it is the connection's
        reply = error_reply(error.code(), fmt::format("{}: {}", name(), error.what()));
        encoded = false;
      }
      if (sent) continue;
      step_profile::Scope replying(step_profile::kPsReply);
      if (!encoded) encode(reply, reply_bytes);
      send_frame(*link, reply_bytes, health, what);
      trim_frame_buffer(reply_bytes);
    }
  } catch (const Error& error) {
    // A worker that went away: an asynchronous job goes on without it (it may come back), but
    // not without the chief, nor without every training task.
    bool done;
    {
      std::lock_guard lock(mutex_);
      connected_.erase(connected_.find(client));
      done = done_.contains(client);
      if (!done) lost_.insert(client);
    }
    ended_cv_.notify_all();  // join() may wait for the last connection after a failure
    if (!stopping_ && !done)
      log::info("{}: the connection from {} ended ({})", name(), client, error.what());
    tokens_cv_.notify_all();  // a synchronous step may not complete any more
    if (!done) check_lost(client);
    check_end();
  }
}

void PsServer::check_lost(const std::string& client) {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (end_ || chief_done_ || stopping_) return;
    if (client == options_.chief && !connected_.contains(client)) {
      why = fmt::format(
          "the connection from the chief ({}) ended before it was done (it was killed or "
          "lost): the chief writes the checkpoints, so the job's steps since its last "
          "checkpoint are lost and no other task saves them",
          client);
    } else {
      for (const std::string& task : connected_)
        if (!done_.contains(task)) return;  // a training task still steps
      why = fmt::format(
          "no training task is connected any more (the last, {}, ended before it was done)",
          client);
    }
  }
  log::error("{}: {}; stopping: restart the job (the chief resumes from the latest checkpoint)",
             name(), why);
  end(JobStatus::error(StatusCode::kAborted,
                       fmt::format("{} stopped the job: {}; restart the job (the chief resumes "
                                   "from the latest checkpoint)",
                                   name(), why)));
}

void PsServer::check_end() {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (end_) return;
    if (done_.size() >= static_cast<size_t>(options_.num_workers)) {
      why = fmt::format("every training task ({}) is done", done_.size());
    } else if (chief_done_) {
      for (const std::string& client : connected_)
        if (!done_.contains(client)) return;  // still training: its steps need this task
      why = "the chief is done and no other training task is still connected";
    } else {
      return;
    }
  }
  log::info("{}: {}; the job is over", name(), why);
  end(JobStatus{});
}

PsReply PsServer::values(const std::vector<std::string>& names, bool shared) const {
  PsReply reply;
  for (const std::string& n : names) {
    std::optional<nn::Variable> variable = store_.find(n);
    // The chief initializes each variable when its model_fn creates it: a worker that asks
    // first waits (as TF's workers wait until the chief's session has initialized the model).
    if (!variable)
      return error_reply(
          StatusCode::kFailedPrecondition,
          fmt::format("{} does not hold '{}' yet (the chief initializes it)", name(), n));
    reply.tensors.push_back(
        {n, shared ? variable->value.detach() : variable->value.detach().clone()});
  }
  if (holds_global_step_)
    reply.global_step = static_cast<int64_t>(store_.get(kGlobalStep).value.item());
  return reply;
}

PsReply PsServer::rows(const std::vector<NamedTensor>& ids, const std::string& client) const {
  PsReply reply = values({});
  ops::NoGradGuard no_grad;
  for (const NamedTensor& t : ids) {
    std::optional<nn::Variable> variable = store_.find(t.name);
    if (!variable)
      return error_reply(
          StatusCode::kFailedPrecondition,
          fmt::format("{} does not hold '{}' yet (the chief initializes it)", name(), t.name));
    const ops::Tensor& value = variable->value;
    if (!t.value.defined() || t.value.dtype() != ops::DType::kI64 || t.value.rank() != 1 ||
        value.rank() == 0)
      return error_reply(StatusCode::kInvalidArgument,
                         fmt::format("{}: {} asked for rows of '{}' without int64 row ids [k]",
                                     name(), client, t.name));
    const int64_t* id = t.value.data<int64_t>();
    for (int64_t i = 0; i < t.value.numel(); ++i)
      if (id[i] < 0 || id[i] >= value.dim(0))
        return error_reply(StatusCode::kInvalidArgument,
                           fmt::format("{}: {} asked for row {} of '{}', which has rows [0, {})",
                                       name(), client, id[i], t.name, value.dim(0)));
    reply.tensors.push_back({t.name, ops::gather(value.detach(), t.value)});
  }
  return reply;
}

void PsServer::apply_moving_averages(const PsRequest& request, const std::string& client) {
  for (const PsMovingAverage& average : request.moving_averages) {
    std::optional<nn::Variable> variable = store_.find(average.name);
    if (!variable)
      throw NotFoundError(fmt::format("this ps task holds no variable '{}' for {}'s moving average",
                                      average.name, client));
    nn::apply_moving_average({variable->value, average.value, average.momentum});
  }
}

PsReply PsServer::handle(const PsRequest& request, const std::string& client,
                         const std::function<void(const PsReply&)>& reply_now) {
  std::unique_lock lock(mutex_);
  // A job that failed answers every request with its error, so that each worker names the
  // cause instead of finishing its steps (or finding the connection closed).
  if (end_ && !end_->ok() && request.kind != PsRequestKind::kAbort)
    return error_reply(end_->code, end_->message);
  switch (request.kind) {
    case PsRequestKind::kInitialize: {
      ops::NoGradGuard no_grad;
      for (const NamedTensor& t : request.tensors) {
        if (store_.contains(t.name))
          store_.assign(t.name, t.value);
        else
          store_.create(t.name, t.value.clone(), false);
        if (t.name == kGlobalStep) holds_global_step_ = true;
      }
      log::debug("{}: {} initialized {} variables", name(), client, request.tensors.size());
      return values({});
    }
    case PsRequestKind::kPull:
    case PsRequestKind::kPushPull: {
      if (request.kind == PsRequestKind::kPushPull) {
        if (accumulator_)
          return error_reply(
              StatusCode::kInvalidArgument,
              fmt::format("{} aggregates gradients synchronously ({} configured it: "
                          "replicas_to_aggregate = {}), but {} pushed asynchronously: give every "
                          "training task the same ParameterServerOptions::sync_replicas",
                          name(), sync_configured_by_, accumulator_->replicas_to_aggregate(),
                          client));
        if (!options_.optimizer)
          return error_reply(StatusCode::kInternal,
                             fmt::format("{} has no optimizer to apply updates with", name()));
        std::vector<nn::GradAndVar> grads;
        for (const NamedTensor& t : request.tensors) {
          std::optional<nn::Variable> variable = store_.find(t.name);
          if (!variable)
            return error_reply(
                StatusCode::kNotFound,
                fmt::format("{} holds no variable '{}' for {}'s gradient", name(), t.name, client));
          // A row-sparse gradient: the optimizer's sparse update (only those rows and their
          // slots change, as TF's sparse apply on a ps task).
          if (t.rows.defined() && t.rows.dense_shape != variable->value.shape())
            return error_reply(
                StatusCode::kInvalidArgument,
                fmt::format("{}: {}'s row-sparse gradient for '{}' is of shape {} "
                            "but the variable is {}",
                            name(), client, t.name, ops::shape_str(t.rows.dense_shape),
                            ops::shape_str(variable->value.shape())));
          grads.push_back({.name = t.name,
                           .gradient = t.value,
                           .variable = variable->value,
                           .sparse_gradient = t.rows});
        }
        // The learning rate's step: ps 0's own count, which each update advances (the job's
        // global step), elsewhere the step the worker saw.
        step_profile::Scope applying(step_profile::kPsApply);
        if (holds_global_step_) {
          options_.optimizer->apply_gradients(store_, std::move(grads));
        } else {
          options_.optimizer->update(store_, std::move(grads), request.global_step);
        }
        ++updates_;
        apply_moving_averages(request, client);
      }
      // Encoded here, under the lock, from the variables themselves: no copy of every value
      // per request (another worker's push may change them once the lock is released).
      step_profile::Scope reading(step_profile::kPsReply);
      PsReply reply = values(request.names, true);
      if (!reply.ok()) return reply;
      reply_now(reply);
      return {};
    }
    case PsRequestKind::kPullRows:
      return rows(request.tensors, client);
    case PsRequestKind::kPullAll: {
      std::vector<std::string> names;
      for (const nn::Variable& v : store_.variables())
        if (v.name != kGlobalStep || holds_global_step_) names.push_back(v.name);
      return values(names);
    }
    case PsRequestKind::kWorkerDone:
    case PsRequestKind::kEndJob:
      done_.insert(request.message);
      if (request.kind == PsRequestKind::kEndJob) chief_done_ = true;
      lock.unlock();
      check_end();
      return {};
    case PsRequestKind::kSyncConfigure:
      return sync_configure(request, client);
    case PsRequestKind::kSyncPush:
      return sync_push(request, client);
    case PsRequestKind::kTakeToken:
      return take_token(request, client, lock);
    case PsRequestKind::kSyncStep:
      return sync_step(request, client, lock);
    case PsRequestKind::kStage:
    case PsRequestKind::kDiscardStaged:
      break;  // serve() keeps them; they get no reply
    case PsRequestKind::kAbort:
      lock.unlock();
      log::error("{}: {} reports that the job failed: {}", name(), client, request.message);
      end(JobStatus::error(StatusCode::kAborted,
                           fmt::format("{} stops: {} reported that the job failed: {}", name(),
                                       client, request.message)));
      return {};
  }
  return error_reply(StatusCode::kInvalidArgument, "unknown request");
}

}  // namespace est::distribute
