// The heartbeat between a worker and its `ps` tasks: how a worker learns that a ps task has
// stopped answering while its connection stays open (the process stopped with SIGSTOP, hung, or
// its host unreachable without a reset). A ps task that dies closes its connections and the
// worker's wait ends at once (distribute/net/data_plane.h); one that stops does not, and without
// this a worker waits for its reply for ever (TensorFlow's workers do: tensorflow#25858).
//
// Each worker opens a second connection to each ps task (ps_handshake.h's kHeartbeat) on which
// a thread of its own sends one byte every 250 ms; the ps task answers each on a thread that
// takes none of its locks, so a long update or a synchronous step's wait for its token does not
// delay the answer. A ps task that has not answered a byte within `timeout` is named by check(),
// which the worker's waits ask between their 100 ms slices.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/net/coordination_state.h"
#include "distribute/net/data_plane.h"

namespace est::distribute {

class PsHeartbeat {
 public:
  // `links[i]`: the heartbeat connection to ps task i, described as `names[i]` ("ps 1 at
  // 127.0.0.1:2300").
  PsHeartbeat(std::vector<Link> links, std::vector<std::string> names,
              std::chrono::milliseconds timeout);
  ~PsHeartbeat();
  PsHeartbeat(const PsHeartbeat&) = delete;
  PsHeartbeat& operator=(const PsHeartbeat&) = delete;

  // An UnavailableError status naming the first ps task that has not answered within the
  // timeout; nullopt while every task answers (or has closed its connection: the request
  // connection names that).
  std::optional<JobStatus> check() const;

 private:
  struct Beat {
    std::atomic<int64_t> sent_ns{0};  // when the unanswered byte left; 0: none unanswered
    std::atomic<bool> closed{false};
  };
  void run();

  std::vector<Link> links_;
  std::vector<std::string> names_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Beat[]> beats_;  // [ps tasks]
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The ps task's side: answers each byte on `link` until the worker closes it or `stopping`
// is set.
void answer_heartbeats(Link& link, const std::atomic<bool>& stopping);

}  // namespace est::distribute
