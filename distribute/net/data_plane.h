// DataPlane: the TCP connections that carry tensors between the workers of a job (the ring's
// links), separate from the gRPC control plane because a plain socket moves bytes at close to
// memory speed on loopback and gRPC's framing and copies do not (bench/collective_bench
// measures both).
//
// Each task listens on its own TF_CONFIG host at a port the system picks, and publishes that
// address when it registers with the coordination service. Once every task has joined, each
// task connects to the next task of the ring and accepts one connection from the previous one.
// A connection starts with a handshake that carries the job token, the job's incarnation and
// the sender's rank; a connection without the right token is closed at once (and logged once).
// Every wait polls in 100 ms slices and asks the job's health check between them, so a peer
// that died (its socket closes) or stopped (the coordination service declares it dead) ends the
// wait with an error naming it, never a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distribute/net/coordination_state.h"
#include "distribute/net/shm_channel.h"

namespace est::distribute {

// What a wait on the data plane asks between its slices: the job's error, if there is one.
// `peer_closed` is true when a peer has just closed its connection: the check may then take a
// moment to learn why (the peer's error report is usually on its way) before the wait reports
// the closed connection itself.
using HealthCheck = std::function<std::optional<JobStatus>(bool peer_closed)>;

// One direction of one connection to a peer: TCP, or a shared-memory channel when the peer is
// on this machine (the TCP connection then only tells whether the peer is still there).
class Link {
 public:
  Link() = default;
  Link(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  Link(Link&& other) noexcept;
  Link& operator=(Link&& other) noexcept;
  ~Link();

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }  // for poll() (the ps heartbeat)
  bool shared_memory() const { return shm_ != nullptr; }
  // The link's one direction goes through `channel` (the data plane's ring: a link either sends
  // or receives).
  void use_shared_memory(std::unique_ptr<ShmChannel> channel) { shm_ = std::move(channel); }
  // Both directions go through shared memory: sends into `outgoing`, receives from `incoming`
  // (a parameter server's connection to a worker on its machine).
  void use_shared_memory(std::unique_ptr<ShmChannel> outgoing,
                         std::unique_ptr<ShmChannel> incoming) {
    shm_ = std::move(outgoing);
    shm_in_ = std::move(incoming);
  }
  const std::string& peer() const { return peer_; }  // "worker:1 at 127.0.0.1:2223"
  // Send or receive exactly n bytes. `what` says what the caller is doing, for messages
  // ("all-reduce at step 812"). UnavailableError naming the peer when it closes the connection,
  // the job's error (from `health`) when the job fails meanwhile.
  void send(const void* data, size_t n, const HealthCheck& health, const std::string& what);
  void receive(void* data, size_t n, const HealthCheck& health, const std::string& what);
  // Sends `n` bytes that `fill` writes straight into a shared-memory channel's buffer, when the
  // link has one and they fit in it (true); false, sending nothing, otherwise, and (with `wait`
  // false) when the channel has not room for them now.
  bool send_whole(size_t n, const std::function<void(char*)>& fill, const HealthCheck& health,
                  const std::string& what, bool wait = true);
  // Receives the next `n` bytes and hands them to `consume` as one span: in place, straight out
  // of a shared-memory channel's buffer, when they fit in it (no copy; the span is valid during
  // the call), else copied into `buffer` (its capacity reused) first.
  void receive_whole(size_t n, std::string& buffer,
                     const std::function<void(std::string_view)>& consume,
                     const HealthCheck& health, const std::string& what);
  // The TCP bytes themselves, whatever carries the data (the handshake).
  void send_raw(const void* data, size_t n, const HealthCheck& health, const std::string& what);
  void receive_raw(void* data, size_t n, const HealthCheck& health, const std::string& what);

 private:
  // Between the shared-memory waits: the job's health, and whether the TCP connection stands.
  void check_alive(const HealthCheck& health, const std::string& what);
  [[noreturn]] void closed(const HealthCheck& health, const std::string& what, int error);

  int fd_ = -1;
  std::string peer_;
  std::unique_ptr<ShmChannel> shm_;
  std::unique_ptr<ShmChannel> shm_in_;  // set: receives come from here, sends go to shm_
};

// A shared-memory channel offered to a peer: this machine's identity (boot id and host name)
// and the channel's name; "" without a channel.
std::string shared_memory_offer(const ShmChannel* channel);
// The channel a peer offered, opened when the offer comes from this machine; null for an empty
// offer, another machine's, or one that cannot be opened (the link then stays on TCP).
std::unique_ptr<ShmChannel> open_offered_channel(const std::string& offer);
// Whether shared-memory channels may be used (the environment variable EST_DATA_PLANE=tcp says
// no).
bool shared_memory_allowed();

// Socket helpers the data plane shares with the parameter servers (distribute/ps/).
// "host:port" split in two ("[::1]:80" gives "::1"); InvalidArgumentError when it is not one.
std::pair<std::string, std::string> split_host_port(const std::string& address);
// A socket listening on host:port (port "0": one the system picks); UnavailableError naming
// `what` ("the data plane") when it cannot.
int listen_tcp(const std::string& host, const std::string& port, const std::string& what);
// The port a listening socket is bound to.
int bound_port(int fd);
// A socket connected to host:port, or -1 (errno says why) when nobody accepts there yet.
int connect_tcp(const std::string& host, const std::string& port);
// No Nagle, 4 MiB buffers, and sends and receives that return every 100 ms (so that waits
// can ask the job's health between slices).
void tune_socket(int fd);

class DataPlane {
 public:
  // Listens on `host` at a free port (UnavailableError naming the host when it cannot).
  // `shared_memory`: use shared-memory channels to neighbours on this machine (the environment
  // variable EST_DATA_PLANE=tcp turns them off).
  DataPlane(const std::string& host, std::string token, bool shared_memory = true);
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  std::string address() const;  // "host:port", to publish

  // Connects the ring: a link to task (rank + 1) % world and one from (rank - 1 + world) %
  // world. `addresses` are the tasks' data addresses, `names` their descriptions for messages.
  // Bounded by `timeout`.
  void connect_ring(int rank, const std::vector<std::string>& addresses,
                    const std::vector<std::string>& names, uint64_t job_incarnation,
                    std::chrono::milliseconds timeout, const HealthCheck& health);

  Link& next() { return next_; }
  Link& previous() { return previous_; }

  // Bytes of each shared-memory channel's buffer.
  static constexpr size_t kSharedMemoryBytes = 4 << 20;

 private:
  int listen_fd_ = -1;
  std::string host_;
  int port_ = 0;
  std::string token_;
  bool shared_memory_;
  Link next_;
  Link previous_;
};

}  // namespace est::distribute
