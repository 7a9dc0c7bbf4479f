// PsClient: connect, then send-all-then-receive-all exchanges.
#include "distribute/ps/ps_client.h"

#include <fmt/format.h>

#include "distribute/ps/ps_handshake.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {

PsClient::PsClient(PsClientOptions options) : options_(std::move(options)) {
  if (options_.ps_addresses.empty())
    throw InvalidArgumentError("PsClient: the cluster lists no ps task");
  for (size_t i = 0; i < options_.ps_addresses.size(); ++i)
    links_.push_back(connect_to_ps(options_.ps_addresses[i], describe(static_cast<int>(i)),
                                   options_.token, options_.task_name, options_.connect_timeout,
                                   options_.health));
  receive_buffers_.resize(links_.size());
  round_trips_.assign(links_.size(), 0);
  frames_sent_.assign(links_.size(), 0);
}

std::string PsClient::describe(int ps) const {
  return fmt::format("ps {} at {}", ps, options_.ps_addresses[static_cast<size_t>(ps)]);
}

std::vector<std::optional<PsReply>> PsClient::exchange(
    const std::vector<std::optional<PsRequest>>& requests, const std::string& what) {
  if (requests.size() != links_.size())
    throw InvalidArgumentError(fmt::format("PsClient::exchange: {} requests for {} ps tasks",
                                           requests.size(), links_.size()));
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!requests[i]) continue;
    if (!expects_reply(requests[i]->kind))
      throw InternalError("PsClient::exchange: a request without a reply; send() it");
    encode(*requests[i], send_buffer_);
    send_frame(links_[i], send_buffer_, options_.health, what);
    bytes_sent_ += send_buffer_.size() + sizeof(uint64_t);
    ++frames_sent_[i];
    ++round_trips_[i];
  }
  trim_frame_buffer(send_buffer_);
  auto sent = std::chrono::steady_clock::now();
  std::vector<std::optional<PsReply>> replies(links_.size());
  std::optional<PsReply> failed;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!requests[i]) continue;
    std::string& bytes = receive_buffers_[i];
    receive_frame(links_[i], options_.health, what, bytes);
    bytes_received_ += bytes.size() + sizeof(uint64_t);
    replies[i] = decode_reply(bytes, describe(static_cast<int>(i)));
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
  auto i = static_cast<size_t>(ps);
  encode(request, send_buffer_);
  send_frame(links_.at(i), send_buffer_, options_.health, what);
  bytes_sent_ += send_buffer_.size() + sizeof(uint64_t);
  ++frames_sent_[i];
  trim_frame_buffer(send_buffer_);
}

std::vector<std::optional<PsReply>> PsClient::broadcast(const PsRequest& request,
                                                        const std::string& what, bool quiet) {
  std::vector<std::optional<PsRequest>> requests(links_.size(), request);
  if (!quiet) return exchange(requests, what);
  std::vector<std::optional<PsReply>> replies(links_.size());
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
