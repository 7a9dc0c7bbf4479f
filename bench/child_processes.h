// The benchmarks that time a job of several processes (multi_worker_bench, ps_bench) start this
// program again in a role, each child with its TF_CONFIG and its output in a log, wait for the
// children, then read their figures (`key=value` lines) back from the logs.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <est/ops/error.h>

extern char** environ;

namespace bench {

// Runs `argv` (this program in a role) with TF_CONFIG `tf_config` (unset when empty) and its
// standard output in `log`; returns its pid. `inherit`: (descriptor here, its number in the
// child) pairs the child gets as well (dup2 clears their close-on-exec there).
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& tf_config,
                   const std::string& log, const std::vector<std::pair<int, int>>& inherit = {}) {
  std::vector<std::string> args = argv;
  std::vector<char*> pointers;
  for (auto& arg : args) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  if (tf_config.empty())
    ::unsetenv("TF_CONFIG");
  else
    ::setenv("TF_CONFIG", tf_config.c_str(), 1);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (const auto& [here, there] : inherit) posix_spawn_file_actions_adddup2(&actions, here, there);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw est::UnavailableError("cannot start a benchmark process");
  return pid;
}

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
