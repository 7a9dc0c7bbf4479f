// The thread governor (ops/thread_governor.h): its decisions on made-up windows (shed under
// contention, grow back only after idle windows and a hold, back off after a failed grow), how a
// thread's count is scaled by the cap, the /proc parsers on recorded text, and the sampler on
// this machine (a process that runs more busy threads than it has cores sees them wait).
#include <doctest/doctest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ops/backend.h"
#include "ops/thread_governor.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {

ContentionSample contended(double now, double waiting) {
  return {.now_seconds = now, .waiting_threads = waiting, .idle_cores = 0};
}
ContentionSample quiet(double now, double idle_cores) {
  return {.now_seconds = now, .waiting_threads = 0, .idle_cores = idle_cores};
}

// Feeds idle windows 0.1 s apart from `start` until the governor grows (or `seconds` pass);
// returns when it grew, or -1.
double grow_time(ThreadGovernor& governor, double start, double seconds) {
  const int before = governor.threads();
  for (double t = start; t < start + seconds; t += 0.1)
    if (governor.update(quiet(t, 1.0)) > before) return t;
  return -1;
}

ThreadPlan plan(const std::map<std::string, std::string>& env, int cores) {
  return plan_threads(
      [&](const char* name) {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      cores);
}

}  // namespace

TEST_CASE("governor: contention sheds as many threads as waited, never below one") {
  ThreadGovernor two(2);
  CHECK(two.threads() == 2);
  CHECK(two.update(contended(0.1, 0.05)) == 2);  // noise: below kContendedWaiting
  CHECK(two.update(contended(0.2, 1.0)) == 1);   // a second process's team: one thread less
  CHECK(two.update(contended(0.3, 3.0)) == 1);   // never below one

  ThreadGovernor sixteen(16);
  CHECK(sixteen.update(contended(0.1, 7.6)) == 8);  // 7.6 threads waited on average: shed 8
  CHECK(sixteen.update(contended(0.2, 0.3)) == 7);  // a little contention still sheds one
}

TEST_CASE("governor: a light wait in one window alone sheds nothing; in two in a row it does") {
  // A process alone on its cores: a passing blip (a daemon's 30 ms) between busy windows.
  ThreadGovernor alone(2);
  CHECK(alone.update(quiet(0.1, 0.0)) == 2);
  CHECK(alone.update(contended(0.2, 0.3)) == 2);
  CHECK(alone.update(quiet(0.3, 0.0)) == 2);
  CHECK(alone.update(contended(0.4, 0.5)) == 2);
  CHECK(alone.update(quiet(0.5, 0.0)) == 2);
  // A busy neighbour that stays: the second light window in a row sheds.
  CHECK(alone.update(contended(0.6, 0.5)) == 2);
  CHECK(alone.update(contended(0.7, 0.5)) == 1);
}

TEST_CASE("governor: idle cores bring threads back, one at a time, after a hold") {
  ThreadGovernor governor(4);
  governor.update(contended(0.0, 2.0));
  REQUIRE(governor.threads() == 2);
  // Busy cores (another process uses what we gave up): no growth, however long.
  for (double t = 0.1; t < 5; t += 0.1) CHECK(governor.update(quiet(t, 0.3)) == 2);
  // Idle windows must come in a row: an interrupted run starts counting again.
  CHECK(governor.update(quiet(5.0, 1.0)) == 2);
  CHECK(governor.update(quiet(5.1, 1.0)) == 2);
  CHECK(governor.update(quiet(5.2, 0.0)) == 2);
  CHECK(governor.update(quiet(5.3, 1.0)) == 2);
  CHECK(governor.update(quiet(5.4, 1.0)) == 2);
  CHECK(governor.update(quiet(5.5, 1.0)) == 3);  // the third idle window in a row
  // The next grow waits for the hold since this change.
  const double next = grow_time(governor, 5.6, 10);
  CHECK(next >= 5.5 + ThreadGovernor::kMinHoldSeconds - 1e-9);
  CHECK(governor.threads() == 4);
  CHECK(grow_time(governor, next + 0.1, 10) < 0);  // never above the maximum
}

TEST_CASE("governor: a grow met by contention doubles the hold; one that lasts resets it") {
  ThreadGovernor governor(2);
  governor.update(contended(0.0, 1.0));
  double t = grow_time(governor, 0.1, 10);
  REQUIRE(t > 0);
  CHECK(governor.hold_seconds() == ThreadGovernor::kMinHoldSeconds);
  // Two processes that keep colliding: each failed probe doubles the wait before the next.
  double previous_gap = 0;
  for (int collision = 1; collision <= 6; ++collision) {
    CHECK(governor.update(contended(t + 0.1, 1.0)) == 1);
    const double hold = governor.hold_seconds();
    CHECK(hold == std::min(ThreadGovernor::kMaxHoldSeconds,
                           ThreadGovernor::kMinHoldSeconds * (1 << collision)));
    const double grown = grow_time(governor, t + 0.2, 60);
    REQUIRE(grown > 0);
    CHECK(grown - (t + 0.1) >= hold - 1e-9);
    CHECK(grown - (t + 0.1) >= previous_gap - 1e-9);
    previous_gap = grown - (t + 0.1);
    t = grown;
  }
  CHECK(governor.hold_seconds() == ThreadGovernor::kMaxHoldSeconds);
  // This grow lasts: after kFailedGrowSeconds without contention the hold is short again.
  governor.update(quiet(t + ThreadGovernor::kFailedGrowSeconds + 0.1, 0.0));
  CHECK(governor.hold_seconds() == ThreadGovernor::kMinHoldSeconds);
  CHECK(governor.threads() == 2);
}

TEST_CASE("governor: a thread's own count is scaled by the cap") {
  CHECK(scaled_thread_count(2, 2, 2) == 2);  // no contention: unchanged
  CHECK(scaled_thread_count(5, 2, 2) == 5);  // a thread that asked for more than the plan
  CHECK(scaled_thread_count(2, 1, 2) == 1);
  CHECK(scaled_thread_count(4, 6, 8) == 3);  // a replica with half the process's threads
  CHECK(scaled_thread_count(1, 1, 8) == 1);  // never below one
  CHECK(scaled_thread_count(4, 1, 2) == 2);
}

TEST_CASE("governor: EST_ADAPTIVE_THREADS turns it off, and a bad value names the variable") {
  CHECK(plan({}, 4).adaptive);
  CHECK(plan({{"EST_ADAPTIVE_THREADS", ""}}, 4).adaptive);
  CHECK(plan({{"EST_ADAPTIVE_THREADS", "1"}}, 4).adaptive);
  CHECK_FALSE(plan({{"EST_ADAPTIVE_THREADS", "0"}}, 4).adaptive);
  CHECK_FALSE(plan({{"EST_ADAPTIVE_THREADS", "Off"}}, 4).adaptive);
  const std::string message = error_message<InvalidArgumentError>([] {
    plan({{"EST_ADAPTIVE_THREADS", "sometimes"}}, 4);
  });
  CHECK(contains(message, "EST_ADAPTIVE_THREADS='sometimes'"));
  CHECK(contains(message, "set it to 0"));
}

TEST_CASE("governor: the suites run with a fixed count, so active threads are the requested") {
  // tests/main.cpp sets EST_ADAPTIVE_THREADS=0 unless the environment chose.
  if (configure_threads().adaptive)
    return est::testing::skip("EST_ADAPTIVE_THREADS is on in this run's environment");
  int requested = 0, active = 0;
  std::thread([&] {
    requested = num_threads();
    active = active_threads();
  }).join();
  CHECK(active == requested);
  CHECK(requested == configure_threads().threads);
}

TEST_CASE("governor: /proc's run delay and idle time are read from recorded text") {
  CHECK(parse_run_delay_ns("96187 1574541 2\n") == 1574541);
  CHECK(parse_run_delay_ns("0 0 0") == 0);
  CHECK_FALSE(parse_run_delay_ns("").has_value());
  CHECK_FALSE(parse_run_delay_ns("12 34").has_value());
  CHECK_FALSE(parse_run_delay_ns("cpu 1 2 3").has_value());

  const std::string stat =
      "\ncpu  58933 0 5830 11815 328 0 33 79 0 0\n"
      "cpu0 28863 0 2787 6806 19 0 4 37 0 0\n"
      "cpu1 30069 0 3043 5008 309 0 29 41 0 0\n"
      "cpu10 1 0 1 1000000 0 0 0 0 0 0\n"
      "intr 123\n";
  CHECK(parse_idle_jiffies(stat, {0}) == 6806 + 19);
  CHECK(parse_idle_jiffies(stat, {1}) == 5008 + 309);  // cpu1, not cpu10
  CHECK(parse_idle_jiffies(stat, {0, 1}) == 6806 + 19 + 5008 + 309);
  CHECK_FALSE(parse_idle_jiffies(stat, {2}).has_value());  // a CPU we may run on is missing
  CHECK_FALSE(parse_idle_jiffies("\ncpu0 1 2\n", {0}).has_value());
}

TEST_CASE("governor: the sampler sees threads wait when the process runs more than its cores") {
  ContentionSampler sampler;
  sampler.sample();  // the first call starts the window
  if (!sampler.available())
    return est::testing::skip("no /proc/self/task/*/schedstat or /proc/stat on this system");
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cpus = CPU_COUNT(&set);
  // 2 x cpus + 1 threads that never block: at any moment at least cpus + 1 of them wait.
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 2 * cpus + 1; ++i)
    busy.emplace_back([&] {
      volatile uint64_t spins = 0;
      while (!stop.load(std::memory_order_relaxed)) spins = spins + 1;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::optional<ContentionSample> sample = sampler.sample();  // while they still run
  stop = true;
  for (std::thread& thread : busy) thread.join();
  REQUIRE(sample.has_value());
  CHECK(sample->waiting_threads >= ThreadGovernor::kContendedWaiting);
  CHECK(sample->idle_cores >= 0);
  CHECK(sample->idle_cores <= cpus + 0.5);  // jiffies are coarse
}
