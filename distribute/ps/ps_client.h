// PsClient: a worker's connections to every `ps` task of the job, and the exchange that makes
// a step one round trip per ps task: every task's request is sent before any reply is read, so
// the tasks work in parallel.
//
// A step's large gradients may go ahead of its request in frames that get no reply (send());
// round_trips() counts the replies waited for, per task: one per ps task per step.
//
// A ps task that dies closes its connection: the exchange then fails within a 100 ms slice with
// an UnavailableError naming the task ("ps 1 at 127.0.0.1:2300 stopped responding ..."); one that
// stops answering with its connection open (SIGSTOP) is named once its heartbeat has been missing
// for heartbeat_timeout (ps_heartbeat.h); a reply that is an error is rethrown with its code,
// naming the task.
//
// With connect_at_first_use the constructor only records the cluster (as TensorFlow's
// constructors do: pods come up in any order, a ps host may not resolve yet, the job token may
// come later): the first request connects, retrying until connect_timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distribute/ps/ps_wire.h"

namespace est::distribute {

class PsHeartbeat;

struct PsClientOptions {
  std::vector<std::string> ps_addresses;  // [ps tasks], TF_CONFIG's "ps" job
  // The job token; unset: job_token_from_environment(), read when connecting.
  std::optional<std::string> token;
  std::string task_name;  // this task, "worker 1", for the ps tasks' logs
  // How long to wait for a ps task to accept (TensorFlow's session_creation_timeout).
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(2)};
  HealthCheck health;  // asked between slices of every wait (may be empty)
  // How long a ps task may leave a heartbeat unanswered before it is named as stopped.
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(3)};
  // false: the constructor connects; true: the first request does.
  bool connect_at_first_use = false;
};

class PsClient {
 public:
  // Connects to every ps task (UnavailableError naming the one that does not answer), unless
  // connect_at_first_use.
  explicit PsClient(PsClientOptions options);
  ~PsClient();
  PsClient(PsClient&&) noexcept;
  int num_ps() const { return static_cast<int>(options_.ps_addresses.size()); }
  // Connects now if not connected yet (every request does so first).
  void connect();
  bool connected() const { return !links_.empty(); }
  // "ps 1 at 127.0.0.1:2300".
  std::string describe(int ps) const;
  // Whether the connection to ps task `ps` goes through shared memory (the task is on this
  // machine and EST_DATA_PLANE is not "tcp"; ps_handshake.h); false before connecting.
  bool shared_memory(int ps) const {
    return connected() && links_.at(static_cast<size_t>(ps)).shared_memory();
  }

  // Sends requests[i] to ps task i (unset: nothing for it), then reads the replies; replies[i]
  // is unset where no request went. A reply that is an error is thrown (its code, naming the
  // task), after every reply has been read.
  // `into`: where the replies' values may be decoded to (decode_reply).
  std::vector<std::optional<PsReply>> exchange(
      const std::vector<std::optional<PsRequest>>& requests, const std::string& what,
      const DecodeInto& into = {});
  // Sends `request`, which gets no reply (expects_reply() is false: kStage), to ps task `ps`.
  void send(int ps, const PsRequest& request, const std::string& what);
  // The same request to every ps task; best effort when `quiet` (errors are logged, not
  // thrown: the end of a job, or its failure; a client not connected yet connects, at most
  // 30 s, unless connecting already failed).
  std::vector<std::optional<PsReply>> broadcast(const PsRequest& request, const std::string& what,
                                                bool quiet = false);

  // Bytes this client sent and received (frames included), for benchmarks.
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  // Requests sent to ps task `ps` whose reply this client waited for, and frames sent to it
  // (those and the ones without a reply), for tests and benchmarks.
  uint64_t round_trips(int ps) const { return round_trips_.at(static_cast<size_t>(ps)); }
  uint64_t frames_sent(int ps) const { return frames_sent_.at(static_cast<size_t>(ps)); }
  // Seconds exchange() spent waiting for replies once its requests were sent (benchmarks: the
  // part of a step the worker waits for the ps tasks).
  double seconds_waiting() const { return seconds_waiting_; }

 private:
  PsClientOptions options_;
  std::vector<Link> links_;  // [ps tasks]; empty until connected
  std::unique_ptr<PsHeartbeat> heartbeat_;
  HealthCheck health_;  // options_.health, then the heartbeat
  bool connect_failed_ = false;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  std::vector<uint64_t> round_trips_;  // [ps tasks]
  std::vector<uint64_t> frames_sent_;  // [ps tasks]
  double seconds_waiting_ = 0;
  // Frames are encoded into and received into these, reused from step to step (ps_wire.h).
  std::string send_buffer_;
  std::vector<std::string> receive_buffers_;  // [ps tasks]
};

}  // namespace est::distribute
