// ps_bench --profile: the split of a parameter-server job's step. A worker's (StepTimer): the
// bench's phases (forward pass, train op) and the library's inside the train op (step_profile's
// ps_send, ps_wait, ps_write: encoding and sending the frames, waiting for and receiving the
// replies, decoding them into the store), its threads' CPU, run delay and migrations, and the
// process's CPU and page faults, per timed step (bench/step_timer.h). The ps task's
// (ps_task_report): its receive, apply and reply phases and its threads, per push it served.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <est/distribute/net/step_profile.h>

#include "bench/step_timer.h"

namespace bench {

// Samples every thread's counters every 20 ms until stop(), keeping each thread's last sample:
// the ps task's connection threads have ended (and left /proc) by the time its join() returns.
class ThreadWatch {
 public:
  explicit ThreadWatch(bool on) {
    if (!on) return;
    thread_ = std::thread([this] {
      {
        std::lock_guard lock(mutex_);
        own_tid_ = this_tid();
      }
      while (!stop_) {
        auto now = thread_stats();
        {
          std::lock_guard lock(mutex_);
          for (const auto& [tid, stat] : now) last_[tid] = stat;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~ThreadWatch() { stop(); }
  // The last sample of every thread seen, but the watch's own.
  ThreadStats stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    std::lock_guard lock(mutex_);
    ThreadStats seen = last_;
    seen.erase(own_tid_);
    return seen;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  int own_tid_ = 0;
  ThreadStats last_;
  std::thread thread_;
};

// The ps task's split per push it applied (the workers' steps, warm-up included). A
// synchronous job's ps applies the averaged gradients through its accumulator, not per push:
// its split is then per request received (push, token and pull each count).
inline std::string ps_task_report(const ThreadStats& threads) {
  sp::Totals totals = sp::totals();
  int64_t pushes = totals.count[sp::kPsApply];
  std::map<int, std::string> roles{{this_tid(), "main"}};
  for (const auto& [role, tid] : sp::threads()) roles[tid] = role;
  std::string text = fmt::format("pushes={}\n", pushes);
  int64_t per = pushes;
  if (pushes == 0) {
    per = totals.count[sp::kPsReceive];
    text += fmt::format("requests={} (the figures below are per request)\n", per);
  }
  text += phase_lines(totals, per);
  text += usage_line({}, process_usage(), per);
  text += thread_report({}, threads, roles, per);
  return text;
}

}  // namespace bench
