// StepProfile: where a multi-worker training step's time goes, for benchmarks
// (bench/multi_worker_bench --profile, bench/ps_bench --profile): wall and thread-CPU time of
// the backward pass, the gradients' all-reduce (and, inside it, the wait for the peer's first
// bytes, i.e. for a slower worker), the optimizer's update, and a parameter-server step's
// exchange (a worker's and a ps task's sides), summed over steps; and the kernel thread ids of the
// threads that do the work (replica, ring sender, collective), so that a bench can read their
// CPU time and run delay from /proc.
//
// Off unless EST_STEP_PROFILE=1 (read once): then a Scope costs two clock reads at each end
// (wall and CLOCK_THREAD_CPUTIME_ID); off, one load of a static flag.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace est::distribute::step_profile {

enum Phase : int {
  kBackward = 0,  // train_op.compute_gradients (apply_overlapped: it starts the buckets too)
  kReduce,        // the all-reduce of the step (sync_step; apply_overlapped: the waits)
  kPeerWait,      // inside a ring collective: waiting for the previous task's header
  kUpdate,        // the moving statistics and the optimizer's update
  // A parameter-server worker (distribute/ps/): encoding and sending its frames (the staged
  // gradients and the step's requests), waiting for and receiving the replies, and decoding
  // them into the store.
  kPsSend,
  kPsWait,
  kPsWrite,
  // A `ps` task, per request it serves: receiving and decoding the frame, applying the update
  // (under the task's lock), and reading the values and encoding and sending the reply.
  kPsReceive,
  kPsApply,
  kPsReply,
  kPhases
};

// "backward", "reduce", "peer_wait", "update", "ps_send", "ps_wait", "ps_write", "ps_receive",
// "ps_apply", "ps_reply".
const char* phase_name(Phase phase);

// Whether EST_STEP_PROFILE=1 (read on the first call).
bool enabled();

struct Totals {
  std::array<int64_t, kPhases> wall_ns{};
  std::array<int64_t, kPhases> cpu_ns{};
  std::array<int64_t, kPhases> count{};
};
// The sums since the start of the process (or the last reset).
Totals totals();
void reset();

// Nanoseconds of CPU the calling thread has used.
int64_t thread_cpu_ns();
// Nanoseconds of the monotonic clock.
int64_t wall_ns();

// Adds one measured interval to `phase`.
void add(Phase phase, int64_t wall, int64_t cpu);

// Times its lifetime into `phase` when profiling is on.
class Scope {
 public:
  explicit Scope(Phase phase);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  bool on_;
  int64_t wall_ = 0;
  int64_t cpu_ = 0;
};

// Records the calling thread's kernel id under `role` ("replica", "ring_sender", "collective")
// when profiling is on; the first thread of each role is kept.
void note_thread(const std::string& role);
// role -> kernel thread id.
std::map<std::string, int> threads();

}  // namespace est::distribute::step_profile
