// Intra-op thread counts: the rule of ops/backend.h (EST_NUM_THREADS, OMP_NUM_THREADS, cores /
// EST_LOCAL_PROCESSES), the cores a process may use, the process's thread governor
// (ops/thread_governor.h), and applying the count to each thread.
//
// OpenMP keeps the thread count per thread (an ICV of the thread's task): a new std::thread starts
// with libgomp's process default (OMP_NUM_THREADS or every CPU), not with what another thread
// set. So every kernel dispatch applies the count to its own thread (apply_thread_count): the
// thread's requested count (the configured one, or its own from set_num_threads: replica threads
// set theirs) scaled down by the governor's cap while the cores are contended. The governor
// samples at most once per kGovernorWindow, on whichever dispatching thread comes first; other
// threads read its cap from an atomic, so the hot path is a clock read and a compare.
#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ops/backend.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "ops/thread_governor.h"

namespace est::ops {
namespace {

constexpr int kMaxThreads = 1 << 16;

constexpr std::chrono::nanoseconds kGovernorWindow = std::chrono::milliseconds(100);

thread_local int t_requested_threads = 0;  // set_num_threads's count; 0: the configured one
thread_local int t_applied_threads = 0;    // what omp_set_num_threads last got on this thread

// A positive integer from an environment variable, nullopt when unset or empty. OpenMP's
// OMP_NUM_THREADS may be a list (one count per nesting level): `first_of_list` takes its first.
std::optional<int> positive_integer(const EnvLookup& env, const char* name, bool first_of_list,
                                    const char* hint) {
  const char* raw = env(name);
  if (raw == nullptr) return std::nullopt;
  std::string text(raw);
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
  text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
  if (text.empty()) return std::nullopt;
  if (first_of_list) text = text.substr(0, text.find(','));
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isdigit(c) != 0;
  });
  const long long value = digits && text.size() <= 6 ? std::stoll(text) : 0;
  if (value < 1 || value > kMaxThreads)
    throw InvalidArgumentError(fmt::format("{}='{}' is not a positive integer (at most {}): {}",
                                           name, raw, kMaxThreads, hint));
  return static_cast<int>(value);
}

std::string lower(const char* text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

// Whether waiting OpenMP threads spin for at most kShortSpin iterations: OMP_WAIT_POLICY=passive,
// or a GOMP_SPINCOUNT (a number with an optional k/M/G suffix, or "infinite") no larger.
bool spin_is_short(const EnvLookup& env) {
  constexpr double kShortSpin = 100000;
  if (const char* policy = env("OMP_WAIT_POLICY"); policy && lower(policy).find("passive") == 0)
    return true;
  const char* raw = env("GOMP_SPINCOUNT");
  if (raw == nullptr) return false;
  char* end = nullptr;
  double count = std::strtod(raw, &end);
  if (end == raw) return false;  // "infinite", or not a number: libgomp's default
  const std::string suffix = lower(end);
  if (suffix == "k") count *= 1e3;
  if (suffix == "m") count *= 1e6;
  if (suffix == "g") count *= 1e9;
  return count <= kShortSpin;
}

// The cgroup CPU quota in cores (rounded up), or 0 when there is none. cgroup v2 first
// (cpu.max: "<quota> <period>" or "max <period>"), then v1 (cpu.cfs_quota_us, -1 for none).
int cgroup_quota_cores() {
  long long quota = -1, period = 0;
  if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
    std::string quota_text;
    v2 >> quota_text >> period;
    if (quota_text != "max" && !quota_text.empty()) quota = std::atoll(quota_text.c_str());
  } else {
    std::ifstream quota_file("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    std::ifstream period_file("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (quota_file && period_file) quota_file >> quota, period_file >> period;
  }
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

// EST_ADAPTIVE_THREADS: unset, empty, 1/true/on: the governor runs; 0/false/off: it does not.
bool adaptive_threads(const EnvLookup& env) {
  const char* raw = env("EST_ADAPTIVE_THREADS");
  if (raw == nullptr || *raw == '\0') return true;
  const std::string value = lower(raw);
  if (value == "1" || value == "true" || value == "on") return true;
  if (value == "0" || value == "false" || value == "off") return false;
  throw InvalidArgumentError(fmt::format(
      "EST_ADAPTIVE_THREADS='{}' is not 0 or 1: set it to 0 to keep the thread count fixed "
      "whatever else runs on the cores, or unset it to shrink the count while they are contended",
      raw));
}

// The process's governor: the cap on intra-op threads for the coming window (plan.threads when
// adaptation is off, the plan has one thread, or /proc cannot be read).
int governed_cap(const ThreadPlan& plan) {
  if (!plan.adaptive || plan.threads <= 1) return plan.threads;
  struct Governed {
    explicit Governed(int max_threads) : governor(max_threads), cap(max_threads) {}
    std::mutex mutex;  // held by the thread that samples
    ContentionSampler sampler;
    ThreadGovernor governor;
    std::atomic<int> cap;
    std::atomic<int64_t> next_sample_ns{0};
  };
  static Governed governed(plan.threads);
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (now < governed.next_sample_ns.load(std::memory_order_relaxed))
    return governed.cap.load(std::memory_order_relaxed);
  std::unique_lock lock(governed.mutex, std::try_to_lock);
  if (!lock || now < governed.next_sample_ns.load(std::memory_order_relaxed))
    return governed.cap.load(std::memory_order_relaxed);
  governed.next_sample_ns.store(
      now +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(kGovernorWindow).count(),
      std::memory_order_relaxed);
  if (const std::optional<ContentionSample> sample = governed.sampler.sample()) {
    const int before = governed.cap.load(std::memory_order_relaxed);
    const int cap = governed.governor.update(*sample);
    if (cap != before)
      log::debug(
          "Intra-op threads: {} -> {} (threads waiting for a core: {:.2f}, idle cores: {:.2f})",
          before, cap, sample->waiting_threads, sample->idle_cores);
    governed.cap.store(cap, std::memory_order_relaxed);
  } else if (!governed.sampler.available()) {
    governed.next_sample_ns.store(INT64_MAX, std::memory_order_relaxed);
    log::debug("Intra-op threads: no scheduler statistics in /proc; the count stays at {}",
               plan.threads);
  }
  return governed.cap.load(std::memory_order_relaxed);
}

}  // namespace

ThreadPlan plan_threads(const EnvLookup& env, int cores) {
  ThreadPlan plan;
  plan.cores = std::max(1, cores);
  plan.short_spin = spin_is_short(env);
  plan.adaptive = adaptive_threads(env);
  plan.local_processes =
      positive_integer(env, "EST_LOCAL_PROCESSES", false,
                       "set it to the number of processes that share this host's cores (the "
                       "launcher sets it), or unset it for one")
          .value_or(1);
  if (auto threads = positive_integer(env, "EST_NUM_THREADS", false,
                                      "set it to the threads each process should use, or unset it "
                                      "to divide the cores among EST_LOCAL_PROCESSES")) {
    plan.threads = *threads;
    plan.rule = fmt::format("EST_NUM_THREADS={}", *threads);
    plan.explicit_count = true;
  } else if (auto omp = positive_integer(env, "OMP_NUM_THREADS", true,
                                         "set it to a thread count, or unset it and use "
                                         "EST_NUM_THREADS / EST_LOCAL_PROCESSES")) {
    plan.threads = *omp;
    plan.rule = fmt::format("OMP_NUM_THREADS={}", *omp);
    plan.explicit_count = true;
  } else {
    plan.threads = std::max(1, plan.cores / plan.local_processes);
    plan.rule = fmt::format("{} cores / {} local process{}", plan.cores, plan.local_processes,
                            plan.local_processes == 1 ? "" : "es");
  }
  plan.oversubscribed = int64_t{plan.threads} * plan.local_processes > plan.cores;
  return plan;
}

int available_cores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  if (const int quota = cgroup_quota_cores(); quota > 0) cores = std::min(cores, quota);
  return std::max(1, cores);
}

namespace {

ThreadPlan configure_process() {
  const ThreadPlan plan =
      plan_threads([](const char* name) { return std::getenv(name); }, available_cores());
  log::debug("Intra-op threads: {} ({}{})", plan.threads, plan.rule,
             plan.adaptive ? ", fewer while other work contends for the cores" : "");
  if (plan.oversubscribed)
    log::warning(
        "{} thread{} x {} local process{} on {} cores ({}): the host is oversubscribed; set "
        "EST_LOCAL_PROCESSES to the number of processes sharing it, or EST_NUM_THREADS{}",
        plan.threads, plan.threads == 1 ? "" : "s", plan.local_processes,
        plan.local_processes == 1 ? "" : "es", plan.cores, plan.rule,
        plan.short_spin ? ""
                        : ". OpenMP threads also spin while they wait, which slows every process: "
                          "set GOMP_SPINCOUNT=10000 or OMP_WAIT_POLICY=passive before starting");
  return plan;
}

}  // namespace

const ThreadPlan& configure_threads() {
  static const ThreadPlan plan = configure_process();  // a throw leaves it for the next call
  return plan;
}

int threads_for_local_processes(int local_processes) {
  const ThreadPlan& plan = configure_threads();
  if (plan.explicit_count) return plan.threads;
  return std::max(1, plan.cores / std::max(local_processes, plan.local_processes));
}

std::vector<std::pair<std::string, std::string>> thread_environment_for_children(
    int local_processes) {
  if (local_processes < 1)
    throw InvalidArgumentError(
        fmt::format("thread_environment_for_children: need at least one local process, got {}",
                    local_processes));
  std::vector<std::pair<std::string, std::string>> variables{
      {"EST_LOCAL_PROCESSES", std::to_string(local_processes)}};
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    variables.emplace_back("GOMP_SPINCOUNT", "10000");
  return variables;
}

void apply_thread_count() {
  if (omp_in_parallel()) return;
  const ThreadPlan& plan = configure_threads();
  const int requested = t_requested_threads > 0 ? t_requested_threads : plan.threads;
  const int threads = scaled_thread_count(requested, governed_cap(plan), plan.threads);
  if (threads == t_applied_threads) return;
  omp_set_num_threads(threads);
  t_applied_threads = threads;
}

int num_threads() {
  return t_requested_threads > 0 ? t_requested_threads : configure_threads().threads;
}

int active_threads() {
  apply_thread_count();
  return omp_get_max_threads();
}

void set_num_threads(int threads) {
  if (threads < 1)
    throw InvalidArgumentError("set_num_threads: need at least one thread, got " +
                               std::to_string(threads));
  t_requested_threads = threads;
  apply_thread_count();
}

}  // namespace est::ops
