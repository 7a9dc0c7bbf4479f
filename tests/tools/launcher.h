// Running est-launch from the tests: with fake_task as its program, bounded in time, its
// output (stdout and stderr) captured, and every process it started killed by pid at the end
// of the test whatever happened (fake_task records its pid in $FAKE_TASK_PID_DIR; est-launch
// itself runs in a tests/process_group.h group, killed when the group goes away).
#pragma once

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/command.h"
#include "tests/process_group.h"

#ifndef EST_LAUNCH_PATH
#error "EST_LAUNCH_PATH must name the est-launch program"
#endif
#ifndef FAKE_TASK_PATH
#error "FAKE_TASK_PATH must name the fake_task program"
#endif

namespace est::testing {

inline const std::string kEstLaunch = EST_LAUNCH_PATH;
inline const std::string kFakeTask = FAKE_TASK_PATH;

inline int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// One run of est-launch. The destructor kills what is left: est-launch (its group) and every
// fake_task that recorded its pid and still runs fake_task.
class LaunchRun {
 public:
  static constexpr std::chrono::seconds kTimeout{60};

  LaunchRun() : group_(scratch_.str()) {
    std::filesystem::create_directory(pid_dir());
    std::filesystem::create_directory(dir());
  }
  ~LaunchRun() {
    group_.kill_all();
    kill_tasks();
  }

  // Where fake_task's files of this run may go (barrier, markers, records).
  std::string dir() const { return scratch_ / "files"; }
  std::string pid_dir() const { return scratch_ / "pids"; }

  // Starts `est-launch launcher_args... -- fake_task task_args...`.
  void start(const std::vector<std::string>& launcher_args,
             const std::vector<std::string>& task_args,
             std::map<std::string, std::string> environment = {}) {
    std::vector<std::string> argv{kEstLaunch};
    argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
    argv.push_back("--");
    argv.push_back(kFakeTask);
    argv.insert(argv.end(), task_args.begin(), task_args.end());
    start_raw(argv, std::move(environment));
  }
  void start_raw(const std::vector<std::string>& argv,
                 std::map<std::string, std::string> environment = {}) {
    environment["FAKE_TASK_PID_DIR"] = pid_dir();
    group_.start(argv, environment);
  }

  pid_t pid() const { return group_.pid(0); }
  void signal(int signal_number) { group_.signal(0, signal_number); }

  // est-launch's exit code, or -N when signal N ended it. Fails the test when it does not end
  // in time.
  int wait() {
    std::optional<int> code = group_.wait(0, kTimeout);
    REQUIRE_MESSAGE(code.has_value(), "est-launch did not end in time\n", output());
    return *code;
  }

  std::string output() const { return group_.output(0); }

  // Waits (bounded) until the output holds `part` `count` times.
  void wait_for_output(const std::string& part, int count = 1) {
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (count_of(output(), part) < count) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no '", part, "' x", count,
                      " in time\n", output());
      REQUIRE_MESSAGE(!group_.wait(0, std::chrono::milliseconds(0)), "est-launch ended early\n",
                      output());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // The ids fake_task recorded (every task started so far).
  std::vector<pid_t> task_pids() const {
    std::vector<pid_t> pids;
    for (const auto& entry : std::filesystem::directory_iterator(pid_dir()))
      pids.push_back(std::stoi(entry.path().filename().string()));
    return pids;
  }

 private:
  void kill_tasks() {
    for (pid_t pid : task_pids()) {
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      std::string command;
      std::getline(cmdline, command, '\0');
      if (command.find("fake_task") != std::string::npos) ::kill(pid, SIGKILL);
    }
  }

  ScratchDir scratch_;
  ProcessGroup group_;
};

// A config line of fake_task, as est-launch passes it on ("[worker:1] task=worker:1 ...").
struct ConfigLine {
  std::string prefix;  // "worker:1"
  std::string task;    // "worker:1"
  std::string token, token_file, omp, tf_config;
};

inline std::vector<ConfigLine> config_lines(const std::string& output) {
  static const std::regex pattern(
      R"(^(?:\[([a-z]+:[0-9]+)\] )?task=(\S+) token=(\S*) token_file=(\S*) omp=(\S*) tf_config=(.*)$)");
  std::vector<ConfigLine> found;
  for (const std::string& line : lines_of(output)) {
    std::smatch match;
    if (std::regex_match(line, match, pattern))
      found.push_back({match[1], match[2], match[3], match[4], match[5], match[6]});
  }
  return found;
}

}  // namespace est::testing
