// A seeded training is bitwise reproducible whatever the thread governor does (DESIGN: results
// never depend on the thread count). seeded_cnn_trainer trains the tutorial CNN at the default
// thread count with the governor on, pinned to two CPUs, once alone and once while busy
// neighbour processes spin on both CPUs, so that the governor sheds threads; both checkpoints
// must hold the same bits in every variable. A run resumed from a mid checkpoint under the
// neighbours must equal the uninterrupted run too. The neighbours are bounded in time and killed
// by pid when the test ends, however it ends.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "tests/command.h"
#include "tests/skip.h"

#ifndef EST_TEST_TRAINER_PROGRAM
#error "build with -DEST_TEST_TRAINER_PROGRAM=<path of seeded_cnn_trainer>"
#endif

namespace {

using est::testing::run_program;
using est::testing::ScratchDir;

// Why the governor cannot shed threads here ("" when it can): it reads the run delay of this
// process's threads from /proc (a kernel without CONFIG_SCHED_INFO has none).
std::string governor_unavailable() {
  if (std::ifstream("/proc/self/schedstat").good()) return "";
  return "no /proc/self/schedstat: the thread governor cannot see contention on this kernel";
}

// The first two CPUs this thread may run on (fewer when it has fewer).
std::vector<int> first_two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

// Pins the calling thread (and so the processes it starts) to `cpus` for the scope's lifetime.
class PinnedThread {
 public:
  explicit PinnedThread(const std::vector<int>& cpus) {
    REQUIRE(sched_getaffinity(0, sizeof previous_, &previous_) == 0);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus) CPU_SET(cpu, &set);
    REQUIRE(sched_setaffinity(0, sizeof set, &set) == 0);
  }
  ~PinnedThread() { sched_setaffinity(0, sizeof previous_, &previous_); }
  PinnedThread(const PinnedThread&) = delete;
  PinnedThread& operator=(const PinnedThread&) = delete;

 private:
  cpu_set_t previous_;
};

// `count` processes that spin on the calling thread's CPUs for at most kLimit, killed (SIGKILL)
// and reaped by pid when the object goes.
class BusyNeighbours {
 public:
  static constexpr std::chrono::seconds kLimit{300};

  explicit BusyNeighbours(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      REQUIRE_MESSAGE(pid >= 0, "fork failed: ", std::strerror(errno));
      if (pid == 0) spin();
      pids_.push_back(pid);
    }
  }
  ~BusyNeighbours() {
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  BusyNeighbours(const BusyNeighbours&) = delete;
  BusyNeighbours& operator=(const BusyNeighbours&) = delete;

 private:
  [[noreturn]] static void spin() {
    const auto end = std::chrono::steady_clock::now() + kLimit;
    volatile uint64_t counter = 0;
    while (std::chrono::steady_clock::now() < end)
      for (int i = 0; i < 100000; ++i) counter = counter + 1;
    ::_exit(0);
  }
  std::vector<pid_t> pids_;
};

// Trains to `max_steps` in `model_dir` with the default thread count, the governor on unless
// `adaptive` is false (the test suite turns it off for itself); returns the "threads seen"
// line's counts.
std::string train(const std::string& model_dir, int64_t max_steps, const char* optimizer,
                  bool adaptive = true) {
  const auto result = run_program(fmt::format(
      "env -u EST_NUM_THREADS -u OMP_NUM_THREADS -u EST_LOCAL_PROCESSES EST_ADAPTIVE_THREADS={} "
      "{} --model_dir {} --max_steps {} --optimizer {}",
      adaptive ? 1 : 0, EST_TEST_TRAINER_PROGRAM, est::testing::shell_quote(model_dir), max_steps,
      optimizer));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const size_t at = result.output.find("threads seen: ");
  REQUIRE(at != std::string::npos);
  return result.output.substr(at + 14, result.output.find('\n', at) - at - 14);
}

// Every variable of the two latest checkpoints holds the same bits.
void check_same_checkpoints(const std::string& a, const std::string& b) {
  namespace checkpoint = est::checkpoint;
  CHECK(checkpoint::read_info(a).global_step == checkpoint::read_info(b).global_step);
  const auto variables = checkpoint::list_variables(a);
  REQUIRE(variables.size() == checkpoint::list_variables(b).size());
  REQUIRE(!variables.empty());
  for (const auto& variable : variables) {
    INFO(variable.name);
    const est::Tensor x = checkpoint::load_variable(a, variable.name);
    const est::Tensor y = checkpoint::load_variable(b, variable.name);
    REQUIRE(x.shape() == y.shape());
    REQUIRE(x.dtype() == y.dtype());
    CHECK(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0);
  }
}

TEST_CASE("threads: a seeded training alone and beside busy neighbours saves the same bits") {
  const std::vector<int> cpus = first_two_cpus();
  if (cpus.size() < 2) return est::testing::skip("needs two CPUs to share with a neighbour");
  if (const std::string why = governor_unavailable(); !why.empty()) return est::testing::skip(why);
  PinnedThread pinned(cpus);
  ScratchDir alone, fixed, beside;
  const std::string alone_threads = train(alone.str(), 40, "sgd");
  // The fixed team of both CPUs, whatever the machine's load: 2 threads at every step.
  CHECK(train(fixed.str(), 40, "sgd", /*adaptive=*/false) == "2");
  std::string busy_threads;
  {
    BusyNeighbours neighbours(2);
    busy_threads = train(beside.str(), 40, "sgd");
  }
  INFO("thread counts alone: ", alone_threads, "; beside the neighbours: ", busy_threads);
  CHECK(busy_threads.find('1') != std::string::npos);  // the governor shed a thread
  check_same_checkpoints(alone.str(), beside.str());
  check_same_checkpoints(fixed.str(), beside.str());
}

TEST_CASE("threads: a training resumed beside busy neighbours equals the uninterrupted one") {
  const std::vector<int> cpus = first_two_cpus();
  if (cpus.size() < 2) return est::testing::skip("needs two CPUs to share with a neighbour");
  PinnedThread pinned(cpus);
  ScratchDir uninterrupted, resumed;
  // Uninterrupted on the fixed team of both CPUs; resumed with the governor, half beside the
  // neighbours, so that its steps ran on other thread counts.
  CHECK(train(uninterrupted.str(), 40, "adam", /*adaptive=*/false) == "2");
  train(resumed.str(), 16, "adam");  // a multiple of the 8 batches of an epoch
  {
    BusyNeighbours neighbours(2);
    train(resumed.str(), 40, "adam");
  }
  check_same_checkpoints(uninterrupted.str(), resumed.str());
}

}  // namespace
