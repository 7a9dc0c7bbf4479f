// Running a built program or a script from a test: its exit status and its output (stdout and
// stderr together), bounded in time, and a scratch directory removed at scope exit. For the
// suites that test programs from the outside (cli, scripts).
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace est::testing {

struct ProgramResult {
  int exit_code = -1;  // -1: killed by a signal (the time limit included: 124 from timeout)
  std::string output;  // stdout and stderr
};

// `command` run by /bin/sh under `timeout`, so that a hung program fails the test instead of
// hanging the suite.
inline ProgramResult run_program(const std::string& command, int timeout_seconds = 120) {
  ProgramResult result;
  std::string line =
      "timeout -k 5 " + std::to_string(timeout_seconds) + " " + command + " 2>&1 < /dev/null";
  FILE* pipe = ::popen(line.c_str(), "r");
  REQUIRE_MESSAGE(pipe != nullptr, "popen failed for ", line);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Whether a program's output (or any text) holds `part`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `text` as one shell word.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A fresh directory under the system's temporary directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "est_test_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace est::testing
