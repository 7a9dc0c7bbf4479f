// PsClient: connect (with the heartbeat), then send-all-then-receive-all exchanges.
#include "distribute/ps/ps_client.h"

#include <fmt/format.h>

#include "distribute/net/job_token.h"
#include "distribute/net/step_profile.h"
#include "distribute/ps/ps_handshake.h"
#include "distribute/ps/ps_heartbeat.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {

PsClient::PsClient(PsClientOptions options) : options_(std::move(options)) {
  if (options_.ps_addresses.empty())
    throw InvalidArgumentError("PsClient: the cluster lists no ps task");
  receive_buffers_.resize(options_.ps_addresses.size());
  round_trips_.assign(options_.ps_addresses.size(), 0);
  frames_sent_.assign(options_.ps_addresses.size(), 0);
  if (!options_.connect_at_first_use) connect();
}

PsClient::~PsClient() = default;
PsClient::PsClient(PsClient&&) noexcept = default;

void PsClient::connect() {
  if (connected()) return;
  if (connect_failed_)
    throw FailedPreconditionError(fmt::format(
        "{} could not connect to the ps tasks before; see the first error", options_.task_name));
  try {
    const std::string token = options_.token ? *options_.token : job_token_from_environment();
    std::vector<Link> links, heartbeats;
    std::vector<std::string> names;
    for (size_t i = 0; i < options_.ps_addresses.size(); ++i) {
      names.push_back(describe(static_cast<int>(i)));
      links.push_back(connect_to_ps(options_.ps_addresses[i], names.back(), token,
                                    options_.task_name, options_.connect_timeout, options_.health));
      heartbeats.push_back(connect_to_ps(options_.ps_addresses[i], names.back(), token,
                                         options_.task_name, options_.connect_timeout,
                                         options_.health, PsConnection::kHeartbeat));
    }
    heartbeat_ = std::make_unique<PsHeartbeat>(std::move(heartbeats), std::move(names),
                                               options_.heartbeat_timeout);
    links_ = std::move(links);
  } catch (...) {
    connect_failed_ = true;
    throw;
  }
  // By value: a PsClient moves, its heartbeat (on the heap) does not.
  health_ = [outer = options_.health,
             heartbeat = heartbeat_.get()](bool peer_closed) -> std::optional<JobStatus> {
    if (outer)
      if (std::optional<JobStatus> status = outer(peer_closed)) return status;
    return heartbeat->check();
  };
}

std::string PsClient::describe(int ps) const {
  return fmt::format("ps {} at {}", ps, options_.ps_addresses[static_cast<size_t>(ps)]);
}

std::vector<std::optional<PsReply>> PsClient::exchange(
    const std::vector<std::optional<PsRequest>>& requests, const std::string& what,
    const DecodeInto& into) {
  connect();
  if (requests.size() != links_.size())
    throw InvalidArgumentError(fmt::format("PsClient::exchange: {} requests for {} ps tasks",
                                           requests.size(), links_.size()));
  std::optional<step_profile::Scope> sending(std::in_place, step_profile::kPsSend);
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!requests[i]) continue;
    if (!expects_reply(requests[i]->kind))
      throw InternalError("PsClient::exchange: a request without a reply; send() it");
    bytes_sent_ += send_message(links_[i], *requests[i], send_buffer_, health_, what);
    ++frames_sent_[i];
    ++round_trips_[i];
  }
  trim_frame_buffer(send_buffer_);
  sending.reset();
  auto sent = std::chrono::steady_clock::now();
  std::vector<std::optional<PsReply>> replies(links_.size());
  std::optional<PsReply> failed;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!requests[i]) continue;
    std::string& bytes = receive_buffers_[i];
    // Decoded (into the store's tensors, `into`) straight out of a shared-memory link's buffer,
    // else out of `bytes`.
    std::optional<step_profile::Scope> waiting(std::in_place, step_profile::kPsWait);
    uint64_t n = receive_frame(links_[i], health_, what, bytes, [&](std::string_view frame) {
      waiting.reset();
      step_profile::Scope decoding(step_profile::kPsWrite);
      replies[i] = decode_reply(frame, describe(static_cast<int>(i)), into);
    });
    waiting.reset();
    bytes_received_ += n + sizeof(uint64_t);
    trim_frame_buffer(bytes);
    if (!replies[i]->ok() && !failed) failed = replies[i];
  }
  seconds_waiting_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  if (failed) throw_error(failed->code, fmt::format("{} (during {})", failed->message, what));
  return replies;
}

void PsClient::send(int ps, const PsRequest& request, const std::string& what) {
  if (expects_reply(request.kind))
    throw InternalError("PsClient::send: a request that gets a reply; exchange() it");
  connect();
  step_profile::Scope sending(step_profile::kPsSend);
  auto i = static_cast<size_t>(ps);
  bytes_sent_ += send_message(links_.at(i), request, send_buffer_, health_, what);
  ++frames_sent_[i];
  trim_frame_buffer(send_buffer_);
}

std::vector<std::optional<PsReply>> PsClient::broadcast(const PsRequest& request,
                                                        const std::string& what, bool quiet) {
  std::vector<std::optional<PsRequest>> requests(options_.ps_addresses.size(), request);
  if (!quiet) return exchange(requests, what);
  std::vector<std::optional<PsReply>> replies(requests.size());
  if (!connected()) {
    if (connect_failed_) return replies;
    options_.connect_timeout =
        std::min(options_.connect_timeout, std::chrono::milliseconds(std::chrono::seconds(30)));
    try {
      connect();
    } catch (const Error& error) {
      log::debug("{}: could not connect to the ps tasks for {}: {}", options_.task_name, what,
                 error.what());
      return replies;
    }
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    try {
      std::vector<std::optional<PsRequest>> one(links_.size());
      one[i] = request;
      replies[i] = exchange(one, what)[i];
    } catch (const Error& error) {
      log::debug("{} did not take {}: {}", describe(static_cast<int>(i)), what, error.what());
    }
  }
  return replies;
}

}  // namespace est::distribute
