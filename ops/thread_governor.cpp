// The thread governor's decision and the /proc counters it reads (see thread_governor.h).
#include "ops/thread_governor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace est::ops {
namespace {

// The whitespace-separated integers of `text` from its start, up to `limit` of them.
std::vector<int64_t> leading_integers(std::string_view text, size_t limit) {
  std::vector<int64_t> values;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (values.size() < limit) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    int64_t value = 0;
    const auto [next, error] = std::from_chars(p, end, value);
    if (error != std::errc() || next == p) break;
    values.push_back(value);
    p = next;
  }
  return values;
}

// Reads a small /proc file with one read (they are generated on read; no partial lines).
std::optional<std::string> read_small_file(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[256];
  const ssize_t length = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (length <= 0) return std::nullopt;
  return std::string(buffer, static_cast<size_t>(length));
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ThreadGovernor::ThreadGovernor(int max_threads)
    : max_threads_(std::max(1, max_threads)), threads_(max_threads_) {}

int ThreadGovernor::update(const ContentionSample& sample) {
  const double now = sample.now_seconds;
  // A grow that lasted without contention was right: probing may be quick again.
  if (last_grow_ && last_change_ == last_grow_ && now - *last_grow_ >= kFailedGrowSeconds)
    hold_seconds_ = kMinHoldSeconds;
  if (sample.waiting_threads >= kContendedWaiting) {
    idle_windows_ = 0;
    ++contended_windows_;
    // A light wait in one window alone is a passing blip (a daemon, the process's own
    // input thread), not a neighbour: shedding for it cost a process alone up to a second at
    // half its threads, and more when it came right after a grow (the doubled hold).
    const bool persistent =
        sample.waiting_threads >= kHeavyWaiting || contended_windows_ >= kContendedWindowsToShed;
    if (threads_ > 1 && persistent) {
      if (last_grow_ && last_change_ == last_grow_ && now - *last_grow_ < kFailedGrowSeconds)
        hold_seconds_ = std::min(kMaxHoldSeconds, 2 * hold_seconds_);
      const int shed = std::max(1, static_cast<int>(std::lround(sample.waiting_threads)));
      threads_ = std::max(1, threads_ - shed);
      last_change_ = now;
    }
    return threads_;
  }
  contended_windows_ = 0;
  idle_windows_ = sample.idle_cores >= kIdleCoresToGrow ? idle_windows_ + 1 : 0;
  const bool held = last_change_ && now - *last_change_ < hold_seconds_;
  if (threads_ < max_threads_ && idle_windows_ >= kIdleWindowsToGrow && !held) {
    ++threads_;
    last_change_ = last_grow_ = now;
    idle_windows_ = 0;
  }
  return threads_;
}

int scaled_thread_count(int requested, int cap, int max_threads) {
  if (cap >= max_threads) return std::max(1, requested);
  const int64_t scaled = int64_t{requested} * std::max(1, cap) / std::max(1, max_threads);
  return static_cast<int>(std::max<int64_t>(1, scaled));
}

std::optional<int64_t> parse_run_delay_ns(std::string_view schedstat) {
  const std::vector<int64_t> values = leading_integers(schedstat, 3);
  if (values.size() != 3 || values[1] < 0) return std::nullopt;
  return values[1];
}

std::optional<int64_t> parse_idle_jiffies(std::string_view proc_stat,
                                          const std::vector<int>& cpus) {
  int64_t total = 0;
  for (const int cpu : cpus) {
    const std::string label = "\ncpu" + std::to_string(cpu) + " ";
    const size_t at = proc_stat.find(label);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view line = proc_stat.substr(at + label.size());
    line = line.substr(0, line.find('\n'));
    // user nice system idle iowait ...: idle and iowait are both time the CPU had nothing to run.
    const std::vector<int64_t> values = leading_integers(line, 5);
    if (values.size() < 4) return std::nullopt;
    total += values[3] + (values.size() > 4 ? values[4] : 0);
  }
  return total;
}

ContentionSampler::ContentionSampler() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus_.push_back(cpu);
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks > 0) jiffies_per_second_ = static_cast<double>(ticks);
  available_ = !cpus_.empty();
}

std::optional<ContentionSample> ContentionSampler::sample() {
  if (!available_) return std::nullopt;
  const double now = monotonic_seconds();

  // Run delay of every thread of this process; a thread born in the window brings all of its.
  std::map<int64_t, int64_t> run_delay;
  int64_t delay_ns = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) {
    available_ = false;
    return std::nullopt;
  }
  while (const dirent* entry = ::readdir(tasks)) {
    int64_t tid = 0;
    const std::string_view name = entry->d_name;
    if (std::from_chars(name.data(), name.data() + name.size(), tid).ptr !=
        name.data() + name.size())
      continue;  // "." and ".."
    const std::string path = "/proc/self/task/" + std::string(name) + "/schedstat";
    const std::optional<std::string> text = read_small_file(path.c_str());
    const std::optional<int64_t> delay = text ? parse_run_delay_ns(*text) : std::nullopt;
    if (!delay) continue;  // the thread has just exited
    run_delay[tid] = *delay;
    const auto before = run_delay_.find(tid);
    delay_ns += before == run_delay_.end() ? *delay : std::max<int64_t>(0, *delay - before->second);
  }
  ::closedir(tasks);

  std::ifstream stat_file("/proc/stat");
  std::stringstream stat_text;
  stat_text << "\n" << stat_file.rdbuf();
  const std::optional<int64_t> idle = parse_idle_jiffies(stat_text.str(), cpus_);
  if (run_delay.empty() || !idle) {
    available_ = false;  // no schedstat (a kernel without CONFIG_SCHED_INFO) or no /proc/stat
    return std::nullopt;
  }

  std::optional<ContentionSample> sample;
  if (previous_seconds_ && idle_jiffies_ && now > *previous_seconds_) {
    const double wall = now - *previous_seconds_;
    sample = ContentionSample{
        .now_seconds = now,
        .waiting_threads = static_cast<double>(delay_ns) * 1e-9 / wall,
        .idle_cores = static_cast<double>(std::max<int64_t>(0, *idle - *idle_jiffies_)) /
                      jiffies_per_second_ / wall,
    };
  }
  run_delay_ = std::move(run_delay);
  idle_jiffies_ = idle;
  previous_seconds_ = now;
  return sample;
}

}  // namespace est::ops
