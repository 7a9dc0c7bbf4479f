// A --profile of a bench's training steps (multi_worker_bench, ps_bench): per timed step, the
// bench's own phases (the input, the forward pass, the train op: wall and CPU of the replica's
// thread), the library's inside them (distribute/net/step_profile.h: backward, all-reduce, the
// wait for a peer, the ps exchange), the process's CPU and page faults, and every thread's CPU,
// run delay and migrations (bench/thread_stats.h).
#pragma once

#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <est/distribute/net/step_profile.h>

#include "bench/thread_stats.h"

namespace bench {

namespace sp = est::distribute::step_profile;
using ThreadStats = std::map<int, ThreadStat>;

struct ProcessUsage {
  int64_t cpu_ns = 0;
  int64_t minor_faults = 0;
};

inline ProcessUsage process_usage() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_usec * 1000; };
  return {ns(usage.ru_utime) + ns(usage.ru_stime), usage.ru_minflt};
}

// "phase <name> wall_ms/step=... cpu_ms/step=... calls/step=..." for each phase that ran, per
// `per` (steps or requests).
inline std::string phase_lines(const sp::Totals& totals, int64_t per) {
  std::string text;
  double ms = 1e6 * static_cast<double>(std::max<int64_t>(1, per));
  for (int p = 0; p < sp::kPhases; ++p) {
    if (totals.count[p] == 0) continue;
    text += fmt::format("phase {} wall_ms/step={:.3f} cpu_ms/step={:.3f} calls/step={:.2f}\n",
                        sp::phase_name(static_cast<sp::Phase>(p)),
                        static_cast<double>(totals.wall_ns[p]) / ms,
                        static_cast<double>(totals.cpu_ns[p]) / ms,
                        static_cast<double>(totals.count[p]) / static_cast<double>(per));
  }
  return text;
}

inline std::string usage_line(const ProcessUsage& before, const ProcessUsage& after, int64_t per) {
  double n = static_cast<double>(std::max<int64_t>(1, per));
  return fmt::format("process cpu_ms/step={:.3f} minor_faults/step={:.1f}\n",
                     static_cast<double>(after.cpu_ns - before.cpu_ns) / 1e6 / n,
                     static_cast<double>(after.minor_faults - before.minor_faults) / n);
}

// A process's timed steps. The calls are no-ops unless `on`; one replica per process (no race).
class StepTimer {
 public:
  explicit StepTimer(bool on) : on_(on) {}
  void step_begins() {
    if (on_) step_start_ = sp::wall_ns();
  }
  // The step's input is ready (optional: without it the report has no input line).
  void input_ends() {
    if (!on_) return;
    input_wall_ += sp::wall_ns() - step_start_;
    input_timed_ = true;
  }
  void forward_begins() { mark(wall0_, cpu0_); }
  void train_op_begins() {
    if (!on_) return;
    mark(wall1_, cpu1_);
    forward_wall_ += wall1_ - wall0_;
    forward_cpu_ += cpu1_ - cpu0_;
  }
  void train_op_ends() {
    if (!on_) return;
    train_wall_ += sp::wall_ns() - wall1_;
    train_cpu_ += sp::thread_cpu_ns() - cpu1_;
  }
  void step_ends() {
    if (on_) step_ns_.push_back(static_cast<double>(sp::wall_ns() - step_start_));
  }
  // The timed steps start: the sums so far (the warm-up) are dropped.
  void start() {
    if (!on_) return;
    input_wall_ = forward_wall_ = forward_cpu_ = train_wall_ = train_cpu_ = 0;
    step_ns_.clear();
    sp::reset();
    threads_ = thread_stats();
    usage_ = process_usage();
  }
  std::string report(int64_t steps) const {
    ProcessUsage usage = process_usage();
    auto threads = thread_stats();
    std::map<int, std::string> roles{{this_tid(), "main"}};
    for (const auto& [role, tid] : sp::threads()) roles[tid] = role;
    double per = 1e6 * static_cast<double>(steps);
    std::string text = fmt::format("step_ms p10/median/p90/max={}\n", percentiles_ms(step_ns_));
    if (input_timed_)
      text +=
          fmt::format("phase input wall_ms/step={:.3f}\n", static_cast<double>(input_wall_) / per);
    text += fmt::format(
        "phase forward wall_ms/step={:.3f} cpu_ms/step={:.3f}\n"
        "phase train_op wall_ms/step={:.3f} cpu_ms/step={:.3f}\n",
        static_cast<double>(forward_wall_) / per, static_cast<double>(forward_cpu_) / per,
        static_cast<double>(train_wall_) / per, static_cast<double>(train_cpu_) / per);
    text += phase_lines(sp::totals(), steps);
    text += usage_line(usage_, usage, steps);
    text += thread_report(threads_, threads, roles, steps);
    return text;
  }

 private:
  void mark(int64_t& wall, int64_t& cpu) const {
    if (!on_) return;
    wall = sp::wall_ns();
    cpu = sp::thread_cpu_ns();
  }
  bool on_;
  int64_t step_start_ = 0, wall0_ = 0, cpu0_ = 0, wall1_ = 0, cpu1_ = 0;
  int64_t input_wall_ = 0, forward_wall_ = 0, forward_cpu_ = 0, train_wall_ = 0, train_cpu_ = 0;
  bool input_timed_ = false;
  std::vector<double> step_ns_;
  ThreadStats threads_;
  ProcessUsage usage_;
};

// Every line of `text` with `prefix` before it.
inline std::string prefix_lines(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) out += prefix + line + "\n";
  return out;
}

// The profile lines of a child's log ("profile " ...), each prefixed by `who`.
inline void print_profile(const std::string& log, const std::string& who) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("profile ", 0) == 0) fmt::print("  {} {}\n", who, line.substr(8));
}

}  // namespace bench
