// The benchmarks that time a job of several processes (multi_worker_bench, ps_bench) start this
// program again in a role, with its output in a log; these are the parent's side: wait for the
// children, then read their figures (`key=value` lines) back from the logs.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <fstream>
#include <string>
#include <vector>

#include <est/ops/error.h>

namespace bench {

// The number on the first line of `log` that starts with `key=`.
inline double value_in(const std::string& log, const std::string& key) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) return std::stod(line.substr(key.size() + 1));
  throw est::InternalError("no " + key + " in " + log);
}

// Waits for every process of `pids`; throws unless each exited with status 0.
inline void wait_all(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw est::InternalError("a benchmark process failed");
  }
}

}  // namespace bench
