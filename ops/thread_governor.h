// How many intra-op threads a process may use right now, given what else runs on its cores.
//
// Why: libgomp's idle threads spin (300,000 iterations by default, read once when it loads, so no
// library call can shorten it afterwards), and a team of threads waits at every barrier for its
// slowest member. Two processes that each run a team of every core, or one beside a busy
// neighbour, then take turns at spin-waits and train 4-70x slower (bench/threads_bench). A team
// of one thread never waits for another and never spins, so the cure that needs no environment
// variable is to shrink the team while the cores are contended and grow it back when they are
// idle. The process itself is the witness: the kernel counts, per thread, the time it was
// runnable but waiting for a core (run delay, /proc/self/task/*/schedstat), and per CPU the time
// it sat idle (/proc/stat). Both work across processes that do not know each other, est or not.
//
// ThreadGovernor is the decision, pure (tests feed it samples): every window (about 0.1 s)
//   - contended (our threads waited for a core, on average, >= kContendedWaiting threads) in
//     kContendedWindowsToShed windows in a row, or heavily (>= kHeavyWaiting: another team) in
//     one: shed that many threads, at least one, never below one (a light wait in a single
//     window is a passing blip, which cost a process alone its speed when it shed);
//   - else, below the maximum and the CPUs we may run on were idle (>= kIdleCoresToGrow) for
//     kIdleWindowsToGrow windows in a row, and the hold since the last change has passed: one
//     thread more. A grow that is followed by contention within kFailedGrowSeconds doubles the
//     hold (up to kMaxHoldSeconds), so processes that keep colliding probe rarely.
// ContentionSampler reads the kernel's counters into samples; thread_governor_cap() in
// ops/threads.cpp runs both for the process, and ops/backend.h says how the cap is applied.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace est::ops {

// What happened on the cores during one window.
struct ContentionSample {
  double now_seconds = 0;      // monotonic time at the end of the window
  double waiting_threads = 0;  // our threads' run delay / window: threads waiting, on average
  double idle_cores = 0;       // idle time of the CPUs we may run on / window, in cores
};

class ThreadGovernor {
 public:
  static constexpr double kContendedWaiting = 0.2;
  static constexpr double kHeavyWaiting = 1.0;
  static constexpr int kContendedWindowsToShed = 2;
  static constexpr double kIdleCoresToGrow = 0.8;
  static constexpr int kIdleWindowsToGrow = 3;
  static constexpr double kMinHoldSeconds = 1.0;
  static constexpr double kMaxHoldSeconds = 16.0;
  static constexpr double kFailedGrowSeconds = 5.0;

  explicit ThreadGovernor(int max_threads);  // starts at the maximum

  // Takes one window's sample and returns the thread count for the next window.
  int update(const ContentionSample& sample);
  int threads() const { return threads_; }
  int max_threads() const { return max_threads_; }
  double hold_seconds() const { return hold_seconds_; }

 private:
  int max_threads_;
  int threads_;
  int idle_windows_ = 0;
  int contended_windows_ = 0;  // light or heavy, in a row
  double hold_seconds_ = kMinHoldSeconds;
  std::optional<double> last_change_;  // when threads_ last changed
  std::optional<double> last_grow_;    // when it last grew
};

// A thread's team under the cap: its own count scaled by cap / process maximum (a replica thread
// that asks for half the process's threads gets half the cap), at least one.
int scaled_thread_count(int requested, int cap, int max_threads);

// The run delay in nanoseconds of one /proc/<pid>/task/<tid>/schedstat ("<on cpu ns> <run delay
// ns> <timeslices>"), or nullopt when the text is not that.
std::optional<int64_t> parse_run_delay_ns(std::string_view schedstat);
// The idle jiffies (idle + iowait) of `cpus` in /proc/stat's text, or nullopt when a CPU's line
// is missing or malformed.
std::optional<int64_t> parse_idle_jiffies(std::string_view proc_stat, const std::vector<int>& cpus);

// Reads the counters of this process's threads and of its CPUs; each sample() covers the time
// since the previous one. nullopt from the first call (no window yet) and when /proc cannot be
// read (then `available()` turns false and stays so).
class ContentionSampler {
 public:
  ContentionSampler();
  std::optional<ContentionSample> sample();
  bool available() const { return available_; }

 private:
  bool available_ = true;
  std::vector<int> cpus_;                 // the CPUs of this process's affinity mask
  std::map<int64_t, int64_t> run_delay_;  // tid -> run delay at the previous sample
  std::optional<int64_t> idle_jiffies_;   // at the previous sample
  std::optional<double> previous_seconds_;
  double jiffies_per_second_ = 100;
};

}  // namespace est::ops
