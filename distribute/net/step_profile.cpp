// StepProfile: atomic sums per phase, and the thread ids by role.
#include "distribute/net/step_profile.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string_view>

namespace est::distribute::step_profile {
namespace {

struct State {
  std::array<std::atomic<int64_t>, kPhases> wall{};
  std::array<std::atomic<int64_t>, kPhases> cpu{};
  std::array<std::atomic<int64_t>, kPhases> count{};
  std::mutex mutex;
  std::map<std::string, int> threads;
};

State& state() {
  static State s;
  return s;
}

int64_t read_clock(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case kBackward:
      return "backward";
    case kReduce:
      return "reduce";
    case kPeerWait:
      return "peer_wait";
    case kUpdate:
      return "update";
    case kPsSend:
      return "ps_send";
    case kPsWait:
      return "ps_wait";
    case kPsWrite:
      return "ps_write";
    case kPsReceive:
      return "ps_receive";
    case kPsApply:
      return "ps_apply";
    case kPsReply:
      return "ps_reply";
    case kPhases:
      break;
  }
  return "?";
}

bool enabled() {
  static const bool on = [] {
    const char* value = std::getenv("EST_STEP_PROFILE");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return on;
}

Totals totals() {
  Totals t;
  State& s = state();
  for (int p = 0; p < kPhases; ++p) {
    t.wall_ns[p] = s.wall[p].load();
    t.cpu_ns[p] = s.cpu[p].load();
    t.count[p] = s.count[p].load();
  }
  return t;
}

void reset() {
  State& s = state();
  for (int p = 0; p < kPhases; ++p) {
    s.wall[p].store(0);
    s.cpu[p].store(0);
    s.count[p].store(0);
  }
}

int64_t thread_cpu_ns() { return read_clock(CLOCK_THREAD_CPUTIME_ID); }
int64_t wall_ns() { return read_clock(CLOCK_MONOTONIC); }

void add(Phase phase, int64_t wall, int64_t cpu) {
  State& s = state();
  s.wall[phase].fetch_add(wall, std::memory_order_relaxed);
  s.cpu[phase].fetch_add(cpu, std::memory_order_relaxed);
  s.count[phase].fetch_add(1, std::memory_order_relaxed);
}

Scope::Scope(Phase phase) : phase_(phase), on_(enabled()) {
  if (!on_) return;
  wall_ = wall_ns();
  cpu_ = thread_cpu_ns();
}

Scope::~Scope() {
  if (on_) add(phase_, wall_ns() - wall_, thread_cpu_ns() - cpu_);
}

void note_thread(const std::string& role) {
  if (!enabled()) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.threads.emplace(role, static_cast<int>(::syscall(SYS_gettid)));
}

std::map<std::string, int> threads() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.threads;
}

}  // namespace est::distribute::step_profile
