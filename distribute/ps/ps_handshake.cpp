// The ps handshake: "ESTPS001" (requests) or "ESTPH001" (heartbeat), the token, the caller's
// name; one byte back (1: accepted). A requests connection then sets up its shared memory: the
// worker's offer (its machine and the name of the channel it writes, or nothing) goes with its
// hello; after the accepting byte the ps task answers with the name of the channel it writes
// (nothing when it did not open the worker's: another machine, or shared memory off), and the
// worker says in one byte whether it opened that one. Both directions use shared memory, or
// neither does.
#include "distribute/ps/ps_handshake.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "distribute/net/job_token.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'E', 'S', 'T', 'P', 'S', '0', '0', '1'};
constexpr char kHeartbeatMagic[8] = {'E', 'S', 'T', 'P', 'H', '0', '0', '1'};
constexpr uint32_t kMaxField = 256;

void log_refusal(const std::string& peer_address, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::string host = peer_address.substr(0, peer_address.rfind(':'));
  std::lock_guard lock(mutex);
  if (logged.insert(host).second)
    log::warning("Refused a parameter-server connection from {}: {}", peer_address, why);
}

// A field of the handshake: its length (uint32), then its bytes, appended to `out`.
void append_field(std::string& out, const std::string& field) {
  const uint32_t n = static_cast<uint32_t>(field.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += field;
}

// One field from `link`; nullopt when it says it is longer than kMaxField (its bytes unread).
std::optional<std::string> receive_field(Link& link, const HealthCheck& health,
                                         const std::string& what) {
  uint32_t n = 0;
  link.receive_raw(&n, sizeof n, health, what);
  if (n > kMaxField) return std::nullopt;
  std::string field(n, '\0');
  link.receive_raw(field.data(), n, health, what);
  return field;
}

}  // namespace

Link connect_to_ps(const std::string& address, const std::string& ps_name, const std::string& token,
                   const std::string& client_name, std::chrono::milliseconds timeout,
                   const HealthCheck& health, PsConnection kind) {
  auto [host, port] = split_host_port(address);
  Clock::time_point deadline = Clock::now() + timeout;
  const std::string what = fmt::format("connecting to {}", ps_name);
  int fd = -1;
  for (;;) {
    std::string why;
    auto pause = std::chrono::milliseconds(50);
    try {
      fd = connect_tcp(host, port);
      if (fd >= 0) break;
      why = std::strerror(errno);
    } catch (const UnavailableError& error) {  // the host does not resolve (yet)
      why = error.what();
      pause = std::chrono::milliseconds(500);  // one name query each time: fewer of them
    }
    if (health)
      if (auto status = health(false)) throw_error(status->code, status->message);
    if (Clock::now() > deadline)
      throw UnavailableError(fmt::format(
          "cannot connect to {} within {} s: {}; is the ps task running, and does its host "
          "resolve from here? (ParameterServerOptions::session_creation_timeout, "
          "RunConfig::session_creation_timeout_secs bound the wait)",
          ps_name, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), why));
    std::this_thread::sleep_for(pause);
  }
  tune_socket(fd);
  Link link(fd, ps_name);
  std::string hello(kind == PsConnection::kHeartbeat ? kHeartbeatMagic : kMagic, sizeof kMagic);
  append_field(hello, token);
  append_field(hello, client_name);
  const bool requests = kind == PsConnection::kRequests;
  std::unique_ptr<ShmChannel> outgoing;
  if (requests) {
    if (shared_memory_allowed()) outgoing = ShmChannel::create(DataPlane::kSharedMemoryBytes);
    append_field(hello, shared_memory_offer(outgoing.get()));
  }
  link.send_raw(hello.data(), hello.size(), health, what);
  uint8_t answer = 0;
  try {
    link.receive_raw(&answer, 1, health, what);
  } catch (const UnavailableError&) {
    answer = 0;
  }
  if (answer != 1)
    throw UnavailableError(fmt::format(
        "{} at {} refused this task's connection: it belongs to another job (the job token "
        "differs); start every task of a job with the same EST_JOB_TOKEN",
        ps_name, address));
  if (!requests) return link;
  // The ps task's offer, within the connect timeout (the heartbeat does not run yet).
  Clock::time_point offer_deadline = Clock::now() + timeout;
  HealthCheck bounded = [&](bool peer_closed) -> std::optional<JobStatus> {
    if (health)
      if (auto status = health(peer_closed)) return status;
    if (Clock::now() > offer_deadline)
      return JobStatus::error(
          StatusCode::kUnavailable,
          fmt::format("{} did not finish the handshake within {} s", ps_name,
                      std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
    return std::nullopt;
  };
  const std::optional<std::string> offer = receive_field(link, bounded, what);
  if (!offer) throw DataLossError(fmt::format("{} sent an oversized shared-memory offer", ps_name));
  std::unique_ptr<ShmChannel> incoming;
  if (outgoing && !offer->empty()) incoming = ShmChannel::open(*offer);
  uint8_t opened = incoming ? 1 : 0;
  link.send_raw(&opened, 1, health, what);
  if (incoming) {
    outgoing->unlink();  // both sides have it mapped
    link.use_shared_memory(std::move(outgoing), std::move(incoming));
  }
  return link;
}

std::optional<PsPeer> accept_ps_client(Link& link, const std::string& token,
                                       const std::string& peer_address) {
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  HealthCheck bounded = [&](bool) -> std::optional<JobStatus> {
    if (Clock::now() > deadline)
      return JobStatus::error(StatusCode::kDeadlineExceeded, "the handshake timed out");
    return std::nullopt;
  };
  const std::string what = "a parameter-server handshake";
  try {
    char magic[sizeof kMagic];
    link.receive_raw(magic, sizeof magic, bounded, what);
    bool heartbeat = std::memcmp(magic, kHeartbeatMagic, sizeof kMagic) == 0;
    if (!heartbeat && std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
      log_refusal(peer_address, "not an est parameter-server handshake");
      return std::nullopt;
    }
    auto get_field = [&] { return receive_field(link, bounded, what); };
    std::optional<std::string> their_token = get_field();
    std::optional<std::string> name = their_token ? get_field() : std::nullopt;
    if (!name || !tokens_equal(*their_token, token)) {
      log_refusal(peer_address, "wrong job token");
      return std::nullopt;
    }
    std::optional<std::string> offer = heartbeat ? std::string() : get_field();
    if (!offer) {
      log_refusal(peer_address, "an oversized shared-memory offer");
      return std::nullopt;
    }
    uint8_t accepted = 1;
    link.send_raw(&accepted, 1, bounded, what);
    if (!heartbeat) {
      // The worker's channel when it is on this machine, and this task's own for the replies.
      std::unique_ptr<ShmChannel> incoming, outgoing;
      if (shared_memory_allowed()) incoming = open_offered_channel(*offer);
      if (incoming) outgoing = ShmChannel::create(DataPlane::kSharedMemoryBytes);
      std::string answer;
      append_field(answer, outgoing ? outgoing->name() : "");
      link.send_raw(answer.data(), answer.size(), bounded, what);
      uint8_t opened = 0;
      link.receive_raw(&opened, 1, bounded, what);
      if (opened == 1 && outgoing) {
        outgoing->unlink();
        link.use_shared_memory(std::move(outgoing), std::move(incoming));
      }
    }
    return PsPeer{.name = *name,
                  .kind = heartbeat ? PsConnection::kHeartbeat : PsConnection::kRequests};
  } catch (const Error& error) {
    log_refusal(peer_address, fmt::format("the handshake failed ({})", error.what()));
    return std::nullopt;
  }
}

}  // namespace est::distribute
