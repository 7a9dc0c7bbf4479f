// est::log: line format, level filtering, EST_LOG_LEVEL parsing, sinks, and that lines from many
// threads never interleave on stderr.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ops/logging.h"

namespace {

using est::log::Level;

// Captures lines through a sink and restores the previous sink and level afterwards.
class CapturedLog {
 public:
  CapturedLog() : previous_level_(est::log::level()) {
    previous_sink_ = est::log::set_sink([this](Level level, std::string_view message) {
      lines.push_back(est::log::format_line(level, message));
    });
  }
  ~CapturedLog() {
    est::log::set_sink(std::move(previous_sink_));
    est::log::set_level(previous_level_);
  }
  std::vector<std::string> lines;

 private:
  Level previous_level_;
  est::log::Sink previous_sink_;
};

}  // namespace

TEST_CASE("log lines look like TensorFlow's Python logging") {
  CapturedLog captured;
  est::log::set_level(Level::kDebug);
  est::log::info("loss = {:.2f}, step = {} ({:.3f} sec)", 2.3301, 100, 0.5);
  est::log::warning("Skipping training since max_steps has already saved.");
  est::log::error("x");
  est::log::debug("d{}", 1);
  REQUIRE(captured.lines.size() == 4);
  CHECK(captured.lines[0] == "INFO:est:loss = 2.33, step = 100 (0.500 sec)");
  CHECK(captured.lines[1] == "WARNING:est:Skipping training since max_steps has already saved.");
  CHECK(captured.lines[2] == "ERROR:est:x");
  CHECK(captured.lines[3] == "DEBUG:est:d1");
}

TEST_CASE("lines below the level are dropped") {
  CapturedLog captured;
  est::log::set_level(Level::kWarning);
  CHECK(est::log::level() == Level::kWarning);
  CHECK_FALSE(est::log::enabled(Level::kInfo));
  CHECK(est::log::enabled(Level::kError));
  est::log::debug("no");
  est::log::info("no");
  est::log::warning("yes {}", 1);
  est::log::error("yes {}", 2);
  REQUIRE(captured.lines.size() == 2);
  CHECK(captured.lines[0] == "WARNING:est:yes 1");
  CHECK(captured.lines[1] == "ERROR:est:yes 2");
  est::log::set_level(Level::kError);
  est::log::warning("no");
  CHECK(captured.lines.size() == 2);
}

TEST_CASE("parse_level accepts names in any case and 0-3") {
  CHECK(est::log::parse_level("DEBUG") == Level::kDebug);
  CHECK(est::log::parse_level("info") == Level::kInfo);
  CHECK(est::log::parse_level("Warning") == Level::kWarning);
  CHECK(est::log::parse_level("eRRor") == Level::kError);
  CHECK(est::log::parse_level("0") == Level::kDebug);
  CHECK(est::log::parse_level("1") == Level::kInfo);
  CHECK(est::log::parse_level("2") == Level::kWarning);
  CHECK(est::log::parse_level("3") == Level::kError);
  CHECK_FALSE(est::log::parse_level("4").has_value());
  CHECK_FALSE(est::log::parse_level("verbose").has_value());
  CHECK_FALSE(est::log::parse_level("").has_value());
  CHECK_FALSE(est::log::parse_level("INFOX").has_value());
}

TEST_CASE("EST_LOG_LEVEL sets the level; an unknown value warns once and uses INFO") {
  CapturedLog captured;
  const char* saved = std::getenv("EST_LOG_LEVEL");
  std::string saved_value = saved ? saved : "";

  setenv("EST_LOG_LEVEL", "error", 1);
  CHECK(est::log::set_level_from_environment() == Level::kError);
  CHECK(est::log::level() == Level::kError);
  setenv("EST_LOG_LEVEL", "0", 1);
  CHECK(est::log::set_level_from_environment() == Level::kDebug);
  unsetenv("EST_LOG_LEVEL");
  CHECK(est::log::set_level_from_environment() == Level::kInfo);
  CHECK(captured.lines.empty());

  setenv("EST_LOG_LEVEL", "loud", 1);
  CHECK(est::log::set_level_from_environment() == Level::kInfo);
  REQUIRE(captured.lines.size() == 1);
  CHECK(captured.lines[0].rfind("WARNING:est:EST_LOG_LEVEL='loud'", 0) == 0);
  CHECK(est::log::set_level_from_environment() == Level::kInfo);
  CHECK(captured.lines.size() == 1);  // once per process

  if (saved) {
    setenv("EST_LOG_LEVEL", saved_value.c_str(), 1);
  } else {
    unsetenv("EST_LOG_LEVEL");
  }
}

TEST_CASE("set_sink returns the previous sink; an empty sink restores stderr") {
  std::vector<std::string> first;
  std::vector<std::string> second;
  Level previous_level = est::log::level();
  est::log::set_level(Level::kInfo);
  est::log::Sink original =
      est::log::set_sink([&](Level, std::string_view message) { first.emplace_back(message); });
  est::log::info("a");
  est::log::Sink returned =
      est::log::set_sink([&](Level, std::string_view message) { second.emplace_back(message); });
  est::log::info("b");
  returned(Level::kInfo, "c");  // the first sink, handed back
  est::log::set_sink(std::move(original));
  est::log::set_level(previous_level);
  CHECK(first == std::vector<std::string>{"a", "c"});
  CHECK(second == std::vector<std::string>{"b"});
}

TEST_CASE("lines from many threads reach stderr whole") {
  // Point fd 2 at a file for the duration of the test.
  char path[] = "/tmp/est_log_test_XXXXXX";
  int file = mkstemp(path);
  REQUIRE(file >= 0);
  std::fflush(stderr);
  int saved_stderr = dup(2);
  REQUIRE(dup2(file, 2) >= 0);
  Level previous_level = est::log::level();
  est::log::set_level(Level::kInfo);

  constexpr int kThreads = 4;
  constexpr int kLines = 200;
  const std::string payload(300, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLines; ++i) est::log::info("thread {} line {} {}", t, i, payload);
    });
  }
  for (auto& thread : threads) thread.join();

  std::fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(file);
  est::log::set_level(previous_level);

  std::ifstream in(path);
  std::string line;
  std::vector<int> next_line(kThreads, 0);
  int count = 0;
  while (std::getline(in, line)) {
    int thread = -1;
    int index = -1;
    char rest[400] = {};
    REQUIRE(std::sscanf(line.c_str(), "INFO:est:thread %d line %d %399s", &thread, &index, rest) ==
            3);
    REQUIRE(thread >= 0);
    REQUIRE(thread < kThreads);
    CHECK(index == next_line[thread]);  // each thread's lines arrive in order, none lost
    next_line[thread] = index + 1;
    CHECK(std::string(rest) == payload);
    ++count;
  }
  std::remove(path);
  CHECK(count == kThreads * kLines);
}
