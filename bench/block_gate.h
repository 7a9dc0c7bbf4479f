// Interleaved runs for the benchmarks that divide two runs' rates (multi_worker_bench, ps_bench,
// threads_bench's one/one_fixed pair): every process of both runs is started at once and waits;
// the parent then lets one run go for a block of steps at a time, alternating the runs (A B B A
// A B ...), so the two rates are measured over the same seconds of the host. On a virtual
// machine whose cores change speed from one second to the next, two runs made one after the
// other compare two different machines; blocks of a few hundred milliseconds compare the same
// one.
//
// A child gets its gate as two inherited socket ends: it writes one byte to fd 4 once it is
// ready (data loaded, job joined), then reads one byte from fd 3 before each block (end of file:
// no more blocks), times the block's steps itself, and writes one byte to fd 4 when the block is
// done. The parent waits at most `timeout` for a block, and its writes to a child that died
// return an error instead of raising SIGPIPE (sockets, MSG_NOSIGNAL): a child that died or hung
// fails the run (the caller kills the others), it never hangs or kills the benchmark.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <est/ops/error.h>

#include "bench/child_processes.h"

namespace bench {

// The child's side.
class ChildGate {
 public:
  // Waits for the parent's go; false when the parent has no more blocks (or is gone).
  static bool wait_for_block() {
    char byte = 0;
    for (;;) {
      ssize_t n = ::read(kGoFd, &byte, 1);
      if (n == 1) return true;
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
  }
  // Ready for the first block, or done with one.
  static void answer() {
    char byte = 'd';
    while (::write(kDoneFd, &byte, 1) < 0 && errno == EINTR) {
    }
  }
  static constexpr int kGoFd = 3;
  static constexpr int kDoneFd = 4;
};

// What a gated child timed.
struct GatedRun {
  int64_t timed_steps = 0;  // blocks x block_steps
  double seconds = 0;       // the blocks' time, warm-up excluded
};

// The child's loop: says it is ready, then for each block the parent allows, runs
// `block_steps` timed steps (step(i), i counting from `warmup`), after `warmup` untimed steps
// and start_timing() before the first block.
template <class Step, class StartTiming>
GatedRun run_gated_blocks(int64_t warmup, int64_t block_steps, const Step& step,
                          const StartTiming& start_timing) {
  GatedRun run;
  ChildGate::answer();
  while (ChildGate::wait_for_block()) {
    if (run.timed_steps == 0) {
      for (int64_t s = 0; s < warmup; ++s) step(s);
      start_timing();
    }
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < block_steps; ++s) step(warmup + run.timed_steps + s);
    run.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.timed_steps += block_steps;
    ChildGate::answer();
  }
  if (run.timed_steps == 0) throw est::InternalError("the gate closed before any block");
  return run;
}

// The parent's side: one gated child.
struct GatedChild {
  pid_t pid = -1;
  int go = -1;    // our end of the socket pair on the child's fd 3
  int done = -1;  // our end of the one on its fd 4
};

// Like spawn() (bench/child_processes.h), with the gate's sockets on fds 3 and 4.
inline GatedChild spawn_gated(const std::vector<std::string>& argv, const std::string& tf_config,
                              const std::string& log) {
  // [0]: the child's end, [1]: the parent's.
  int go[2], done[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0)
    throw est::UnavailableError("cannot make a gate socket pair");
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, done) != 0) {
    ::close(go[0]);
    ::close(go[1]);
    throw est::UnavailableError("cannot make a gate socket pair");
  }
  pid_t pid = -1;
  try {
    pid = spawn(argv, tf_config, log, {{go[0], ChildGate::kGoFd}, {done[0], ChildGate::kDoneFd}});
  } catch (...) {
    for (int fd : {go[0], go[1], done[0], done[1]}) ::close(fd);
    throw;
  }
  ::close(go[0]);
  ::close(done[0]);
  return {pid, go[1], done[1]};
}

// Waits until every child of `group` has written its byte (ready, or done with its block).
inline void await_children(const std::vector<GatedChild>& group, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const GatedChild& child : group) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        throw est::DeadlineExceededError("a benchmark process did not answer its gate in " +
                                         std::to_string(timeout.count()) + " s");
      pollfd fd{child.done, POLLIN, 0};
      int ready = ::poll(&fd, 1, static_cast<int>(left.count()));
      if (ready <= 0) continue;  // EINTR or the timeout: the deadline decides
      char byte = 0;
      if (::read(child.done, &byte, 1) != 1)
        throw est::InternalError(
            "a benchmark process ended before its block was done; see its log");
      break;
    }
  }
}

// Lets every child of `group` run one block and waits until each has finished it; returns the
// block's wall time in seconds, from the first go to the last child's end (for workers that do
// not wait for each other, the time the whole group took).
inline double run_block(const std::vector<GatedChild>& group, std::chrono::seconds timeout) {
  auto start = std::chrono::steady_clock::now();
  for (const GatedChild& child : group) {
    char byte = 'b';
    if (::send(child.go, &byte, 1, MSG_NOSIGNAL) != 1)
      throw est::InternalError("a benchmark process is gone (its gate is closed); see its log");
  }
  await_children(group, timeout);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The blocks' wall times (run_block) of the two groups, in ms, the first block (with the
// children's warm-up) left out.
struct Interleaved {
  std::vector<double> a_ms, b_ms;
  static double seconds(const std::vector<double>& ms) {
    double total = 0;
    for (double block : ms) total += block;
    return total / 1e3;
  }
};

// `blocks` timed blocks of each group in turns, A B B A A B ..., after one untimed block each
// (the children's warm-up and their first timed block), each block after a 30 ms pause (an
// OpenMP team that finished a block stops spinning first; libgomp spins up to 300,000 rounds).
inline Interleaved interleave_blocks(const std::vector<GatedChild>& a,
                                     const std::vector<GatedChild>& b, int64_t blocks,
                                     std::chrono::seconds timeout) {
  Interleaved times;
  for (int64_t block = 0; block <= blocks; ++block) {
    bool a_first = (block % 2) == 0;
    for (int half = 0; half < 2; ++half) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      bool is_a = (half == 0) == a_first;
      double seconds = run_block(is_a ? a : b, timeout);
      if (block > 0) (is_a ? times.a_ms : times.b_ms).push_back(1e3 * seconds);
    }
  }
  return times;
}

// Tells every child that no block follows (they print their figures and exit).
inline void close_gates(std::vector<GatedChild>& children) {
  for (GatedChild& child : children) {
    if (child.go >= 0) ::close(child.go);
    if (child.done >= 0) ::close(child.done);
    child.go = child.done = -1;
  }
}

// After close_gates: waits for every child to exit with status 0, at most `timeout` in all.
inline void wait_children(std::vector<GatedChild>& children, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (GatedChild& child : children) {
    int status = 0;
    for (;;) {
      pid_t done = ::waitpid(child.pid, &status, WNOHANG);
      if (done == child.pid) break;
      if (done < 0 && errno != EINTR) throw est::InternalError("lost a benchmark process");
      if (std::chrono::steady_clock::now() > deadline)
        throw est::DeadlineExceededError("a benchmark process did not exit after its last block");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    child.pid = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw est::InternalError("a benchmark process failed; see its log");
  }
}

// Kills every child still running (by pid) and reaps it.
inline void kill_children(std::vector<GatedChild>& children) {
  close_gates(children);
  for (GatedChild& child : children)
    if (child.pid > 0) ::kill(child.pid, SIGKILL);
  for (GatedChild& child : children)
    if (child.pid > 0) ::waitpid(child.pid, nullptr, 0);
  for (GatedChild& child : children) child.pid = -1;
}

// A whole round of interleaved runs: `start(gated, others)` starts the children, the first
// gated one being run A and the other gated ones run B (`others`: children without a gate, such
// as a ps task, which end when their job does). Waits until every gated child is ready (data
// loaded, job joined; 300 s), runs `blocks` timed blocks of each in turns (interleave_blocks),
// closes the gates and waits for every child to exit (60 s). On any error, in `start` too,
// every child started so far is killed by pid and the error goes on.
template <class Start>
Interleaved interleave_round(const Start& start, int64_t blocks) {
  using namespace std::chrono_literals;
  std::vector<GatedChild> gated, others;
  try {
    start(gated, others);
    await_children(gated, 300s);
    Interleaved times = interleave_blocks(
        {gated.front()}, std::vector<GatedChild>(gated.begin() + 1, gated.end()), blocks, 600s);
    close_gates(gated);
    wait_children(gated, 60s);
    wait_children(others, 60s);
    return times;
  } catch (...) {
    kill_children(gated);
    kill_children(others);
    throw;
  }
}

}  // namespace bench
