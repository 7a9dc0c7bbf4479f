// DataPlane: sockets, the authenticated handshake, and sends and receives that poll the job's
// health between 100 ms slices.
#include "distribute/net/data_plane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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
constexpr char kMagic[8] = {'E', 'S', 'T', 'D', 'A', 'T', 'A', '1'};
constexpr uint32_t kMaxTokenBytes = 256;
constexpr int kSliceMs = 100;
constexpr int kSocketBufferBytes = 4 << 20;

}  // namespace

std::pair<std::string, std::string> split_host_port(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw InvalidArgumentError(fmt::format("'{}' is not a host:port address", address));
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, address.substr(colon + 1)};
}

namespace {

// The first IPv4 (else IPv6) address of host:port.
sockaddr_storage resolve(const std::string& host, const std::string& port, socklen_t& length) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || !found)
    throw UnavailableError(
        fmt::format("cannot resolve host '{}' for the data plane: {}", host, gai_strerror(rc)));
  const addrinfo* chosen = found;
  for (const addrinfo* a = found; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
  sockaddr_storage storage{};
  std::memcpy(&storage, chosen->ai_addr, chosen->ai_addrlen);
  length = chosen->ai_addrlen;
  freeaddrinfo(found);
  return storage;
}

}  // namespace

void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int size = kSocketBufferBytes;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  timeval slice{.tv_sec = 0, .tv_usec = kSliceMs * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &slice, sizeof slice);
}

int listen_tcp(const std::string& host, const std::string& port, const std::string& what) {
  socklen_t length = 0;
  sockaddr_storage address = resolve(host, port, length);
  int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(fd, 16) != 0) {
    int error = errno;
    if (fd >= 0) ::close(fd);
    throw UnavailableError(
        fmt::format("{} cannot listen on {}:{}: {}", what, host, port, std::strerror(error)));
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  return ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                          : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
}

int connect_tcp(const std::string& host, const std::string& port) {
  socklen_t length = 0;
  sockaddr_storage target = resolve(host, port, length);
  int fd = ::socket(target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&target), length) == 0) return fd;
  int error = errno;
  ::close(fd);
  errno = error;
  return -1;
}

namespace {

[[noreturn]] void throw_job_error(const JobStatus& error, const std::string& what) {
  throw_error(error.code, fmt::format("{} (this task was in {})", error.message, what));
}

void check_health(const HealthCheck& health, const std::string& what, bool peer_closed = false) {
  if (!health) return;
  if (auto error = health(peer_closed)) throw_job_error(*error, what);
}

// This machine's identity for shared memory: the kernel's boot id and the host name (tasks in
// containers of one host that do not share /dev/shm fail to open the segment and use TCP).
const std::string& machine_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    std::getline(in, boot);
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return boot + "/" + name;
  }();
  return id;
}

}  // namespace

std::string shared_memory_offer(const ShmChannel* channel) {
  return channel ? machine_id() + "\n" + channel->name() : "";
}

std::unique_ptr<ShmChannel> open_offered_channel(const std::string& offer) {
  const size_t newline = offer.find('\n');
  if (newline == std::string::npos || offer.substr(0, newline) != machine_id()) return nullptr;
  return ShmChannel::open(offer.substr(newline + 1));
}

bool shared_memory_allowed() {
  const char* mode = std::getenv("EST_DATA_PLANE");
  return mode == nullptr || std::string(mode) != "tcp";
}

Link::Link(Link&& other) noexcept
    : fd_(other.fd_),
      peer_(std::move(other.peer_)),
      shm_(std::move(other.shm_)),
      shm_in_(std::move(other.shm_in_)) {
  other.fd_ = -1;
}

Link& Link::operator=(Link&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    shm_ = std::move(other.shm_);
    shm_in_ = std::move(other.shm_in_);
    other.fd_ = -1;
  }
  return *this;
}

Link::~Link() {
  if (fd_ >= 0) ::close(fd_);
}

void Link::send(const void* data, size_t n, const HealthCheck& health, const std::string& what) {
  if (shm_) {
    shm_->write(data, n, [&] { check_alive(health, what); });
    return;
  }
  send_raw(data, n, health, what);
}

void Link::receive(void* data, size_t n, const HealthCheck& health, const std::string& what) {
  if (ShmChannel* channel = shm_in_ ? shm_in_.get() : shm_.get()) {
    char* out = static_cast<char*>(data);
    channel->read(
        n,
        [&](const char* span, size_t k) {
          std::memcpy(out, span, k);
          out += k;
        },
        [&] { check_alive(health, what); });
    return;
  }
  receive_raw(data, n, health, what);
}

bool Link::send_whole(size_t n, const std::function<void(char*)>& fill, const HealthCheck& health,
                      const std::string& what, bool wait) {
  if (!shm_ || n > shm_->capacity()) return false;
  return shm_->write_whole(
      n, fill, [&] { check_alive(health, what); }, wait);
}

void Link::receive_whole(size_t n, std::string& buffer,
                         const std::function<void(std::string_view)>& consume,
                         const HealthCheck& health, const std::string& what) {
  ShmChannel* channel = shm_in_ ? shm_in_.get() : shm_.get();
  if (channel != nullptr && n <= channel->capacity()) {
    channel->read_whole(
        n, [&](const char* span, size_t k) { consume(std::string_view(span, k)); },
        [&] { check_alive(health, what); });
    return;
  }
  buffer.resize(n);  // within its capacity: no fresh pages, no zeroing
  receive(buffer.data(), n, health, what);
  consume(buffer);
}

void Link::check_alive(const HealthCheck& health, const std::string& what) {
  check_health(health, what);
  char byte;
  ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    closed(health, what, got == 0 ? 0 : errno);
}

void Link::closed(const HealthCheck& health, const std::string& what, int error) {
  check_health(health, what, true);  // the job's error names the cause better, if known
  throw UnavailableError(
      fmt::format("{} stopped responding during {}: its connection closed{}; "
                  "it died or failed, see its log",
                  peer_, what, error == 0 ? "" : fmt::format(" ({})", std::strerror(error))));
}

void Link::send_raw(const void* data, size_t n, const HealthCheck& health,
                    const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t sent = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      check_health(health, what);
      continue;
    }
    closed(health, what, errno);
  }
}

void Link::receive_raw(void* data, size_t n, const HealthCheck& health, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t got = ::recv(fd_, p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      check_health(health, what);
      continue;
    }
    closed(health, what, got == 0 ? 0 : errno);
  }
}

DataPlane::DataPlane(const std::string& host, std::string token, bool shared_memory)
    : host_(host), token_(std::move(token)), shared_memory_(shared_memory) {
  if (const char* mode = std::getenv("EST_DATA_PLANE")) {
    std::string value = mode;
    if (value == "tcp")
      shared_memory_ = false;
    else if (value != "auto" && !value.empty())
      throw InvalidArgumentError(fmt::format(
          "EST_DATA_PLANE is '{}'; use 'auto' (shared memory between tasks of one machine, TCP "
          "otherwise) or 'tcp'",
          value));
  }
  listen_fd_ = listen_tcp(host, "0", "the data plane");
  port_ = bound_port(listen_fd_);
}

DataPlane::~DataPlane() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string DataPlane::address() const {
  bool v6 = host_.find(':') != std::string::npos;
  return v6 ? fmt::format("[{}]:{}", host_, port_) : fmt::format("{}:{}", host_, port_);
}

void DataPlane::connect_ring(int rank, const std::vector<std::string>& addresses,
                             const std::vector<std::string>& names, uint64_t job_incarnation,
                             std::chrono::milliseconds timeout, const HealthCheck& health) {
  int world = static_cast<int>(addresses.size());
  if (world < 2) return;
  Clock::time_point deadline = Clock::now() + timeout;
  int next = (rank + 1) % world, previous = (rank - 1 + world) % world;
  const std::string what = "connecting the data plane";

  // Connect to the next task (it listens already: it published its address when it registered).
  auto [host, port] = split_host_port(addresses[static_cast<size_t>(next)]);
  socklen_t length = 0;
  sockaddr_storage target = resolve(host, port, length);
  int fd = -1;
  for (;;) {
    fd = ::socket(target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&target), length) == 0) break;
    int error = errno;
    ::close(fd);
    check_health(health, what);
    if (Clock::now() > deadline)
      throw UnavailableError(fmt::format(
          "cannot connect to {}'s data plane at {}: {}", names[static_cast<size_t>(next)],
          addresses[static_cast<size_t>(next)], std::strerror(error)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  tune_socket(fd);
  next_ = Link(fd, names[static_cast<size_t>(next)]);
  std::string hello(kMagic, sizeof kMagic);
  auto append = [&](const void* p, size_t n) { hello.append(static_cast<const char*>(p), n); };
  uint32_t token_bytes = static_cast<uint32_t>(token_.size());
  uint32_t sender = static_cast<uint32_t>(rank);
  append(&token_bytes, sizeof token_bytes);
  hello += token_;
  append(&job_incarnation, sizeof job_incarnation);
  append(&sender, sizeof sender);
  // A shared-memory channel for this direction, offered to a neighbour on this machine.
  std::unique_ptr<ShmChannel> outgoing;
  if (shared_memory_) outgoing = ShmChannel::create(kSharedMemoryBytes);
  std::string offer = shared_memory_offer(outgoing.get());
  uint32_t offer_bytes = static_cast<uint32_t>(offer.size());
  append(&offer_bytes, sizeof offer_bytes);
  hello += offer;
  next_.send_raw(hello.data(), hello.size(), health, what);

  // Accept the previous task's connection; strangers are refused and logged once.
  static std::mutex log_mutex;
  static std::set<std::string> logged;
  for (;;) {
    check_health(health, what);
    if (Clock::now() > deadline)
      throw DeadlineExceededError(
          fmt::format("{} did not open its data-plane connection to this task in time",
                      names[static_cast<size_t>(previous)]));
    pollfd waiting{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (::poll(&waiting, 1, kSliceMs) <= 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    int accepted =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_length, SOCK_CLOEXEC);
    if (accepted < 0) continue;
    tune_socket(accepted);
    Link incoming(accepted, names[static_cast<size_t>(previous)]);
    char magic[sizeof kMagic];
    uint32_t their_token_bytes = 0;
    std::string refusal, offer_from_previous;
    // A stranger that connects and says nothing is dropped after a short while.
    Clock::time_point handshake_deadline =
        std::min(deadline, Clock::now() + std::chrono::seconds(2));
    HealthCheck bounded = [&](bool) -> std::optional<JobStatus> {
      if (health)
        if (auto error = health(false)) return error;
      if (Clock::now() > handshake_deadline)
        return JobStatus::error(StatusCode::kDeadlineExceeded, "the handshake timed out");
      return std::nullopt;
    };
    try {
      incoming.receive(magic, sizeof magic, bounded, what);
      incoming.receive(&their_token_bytes, sizeof their_token_bytes, bounded, what);
      if (std::memcmp(magic, kMagic, sizeof kMagic) != 0 || their_token_bytes > kMaxTokenBytes) {
        refusal = "not an est data-plane handshake";
      } else {
        std::string their_token(their_token_bytes, '\0');
        uint64_t their_incarnation = 0;
        uint32_t their_rank = 0;
        uint32_t their_offer_bytes = 0;
        incoming.receive(their_token.data(), their_token.size(), bounded, what);
        incoming.receive(&their_incarnation, sizeof their_incarnation, bounded, what);
        incoming.receive(&their_rank, sizeof their_rank, bounded, what);
        incoming.receive(&their_offer_bytes, sizeof their_offer_bytes, bounded, what);
        if (their_offer_bytes <= kMaxTokenBytes) {
          offer_from_previous.assign(their_offer_bytes, '\0');
          incoming.receive(offer_from_previous.data(), their_offer_bytes, bounded, what);
        }
        if (!tokens_equal(their_token, token_))
          refusal = "wrong job token";
        else if (their_incarnation != job_incarnation)
          refusal = "a connection from another run of this job";
        else if (their_rank != static_cast<uint32_t>(previous))
          refusal = fmt::format("rank {} connected, expected {}", their_rank, previous);
        else if (their_offer_bytes > kMaxTokenBytes)
          refusal = "an oversized shared-memory offer";
      }
    } catch (const Error& error) {
      check_health(health, what);
      refusal = fmt::format("the handshake failed ({})", error.what());
    }
    if (refusal.empty()) {
      // Take the previous task's shared-memory channel when it is on this machine, and say so.
      std::unique_ptr<ShmChannel> channel;
      if (shared_memory_) channel = open_offered_channel(offer_from_previous);
      uint8_t answer = channel ? 1 : 0;
      incoming.send_raw(&answer, 1, health, what);
      if (channel) incoming.use_shared_memory(std::move(channel));
      previous_ = std::move(incoming);
      break;
    }
    char text[INET6_ADDRSTRLEN] = "?";
    if (peer.ss_family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, text, sizeof text);
    std::lock_guard lock(log_mutex);
    if (logged.insert(text).second)
      log::warning("Refused a data-plane connection from {}: {}", text, refusal);
  }
  // The next task's answer to this task's offer.
  uint8_t answer = 0;
  next_.receive_raw(&answer, 1, health, what);
  if (answer == 1 && outgoing) {
    outgoing->unlink();  // both sides have it mapped
    next_.use_shared_memory(std::move(outgoing));
  }
}

}  // namespace est::distribute
