// multi_worker_bench --profile: each thread's CPU time, run delay (runnable but waiting for a
// core) and time slices from /proc/self/task/*/schedstat, and its migrations between CPUs from
// /proc/self/task/*/sched where the kernel has it, as snapshots whose difference covers the
// timed steps; plus per-step timers of the bench's own phases (input, forward, the train op).
#pragma once

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

struct ThreadStat {
  int64_t cpu_ns = 0;
  int64_t delay_ns = 0;
  int64_t slices = 0;
  int64_t migrations = -1;  // -1: /proc/.../sched not readable
};

// tid -> its counters now.
inline std::map<int, ThreadStat> thread_stats() {
  std::map<int, ThreadStat> stats;
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return stats;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int tid = std::atoi(entry->d_name);
    std::string base = std::string("/proc/self/task/") + entry->d_name;
    ThreadStat stat;
    std::ifstream schedstat(base + "/schedstat");
    if (!(schedstat >> stat.cpu_ns >> stat.delay_ns >> stat.slices)) continue;
    std::ifstream sched(base + "/sched");
    std::string line;
    while (std::getline(sched, line))
      if (line.rfind("se.nr_migrations", 0) == 0) {
        stat.migrations = std::atoll(line.substr(line.find(':') + 1).c_str());
        break;
      }
    stats[tid] = stat;
  }
  ::closedir(dir);
  return stats;
}

inline int this_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

// One line per thread that ran during the interval, busiest first: "thread <role> cpu_ms=...
// delay_ms=... slices=... migrations=..." (per step where `steps` > 0).
inline std::string thread_report(const std::map<int, ThreadStat>& before,
                                 const std::map<int, ThreadStat>& after,
                                 const std::map<int, std::string>& roles, int64_t steps) {
  struct Row {
    std::string role;
    ThreadStat d;
  };
  std::vector<Row> rows;
  for (const auto& [tid, now] : after) {
    ThreadStat then;
    if (auto it = before.find(tid); it != before.end()) then = it->second;
    ThreadStat d{now.cpu_ns - then.cpu_ns, now.delay_ns - then.delay_ns, now.slices - then.slices,
                 now.migrations < 0 ? -1 : now.migrations - std::max<int64_t>(0, then.migrations)};
    if (d.cpu_ns == 0 && d.delay_ns == 0) continue;
    auto role = roles.find(tid);
    rows.push_back({role == roles.end() ? "other" + std::to_string(tid) : role->second, d});
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.d.cpu_ns > b.d.cpu_ns; });
  std::ostringstream out;
  double per = 1e6 * static_cast<double>(std::max<int64_t>(1, steps));
  for (const Row& row : rows) {
    out << "thread " << row.role << " cpu_ms/step=" << static_cast<double>(row.d.cpu_ns) / per
        << " delay_ms/step=" << static_cast<double>(row.d.delay_ns) / per
        << " slices/step=" << static_cast<double>(row.d.slices) / static_cast<double>(steps);
    if (row.d.migrations >= 0) out << " migrations=" << row.d.migrations;
    out << "\n";
  }
  return out.str();
}

// Sorted step times: "p10/median/p90/max" in ms.
inline std::string percentiles_ms(std::vector<double> ns) {
  if (ns.empty()) return "-";
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return ns[std::min(ns.size() - 1, static_cast<size_t>(q * static_cast<double>(ns.size())))] /
           1e6;
  };
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << at(0.1) << "/" << at(0.5) << "/" << at(0.9) << "/" << ns.back() / 1e6;
  return out.str();
}

}  // namespace bench
