// checkpoint/log.h writes through est::log (ops/logging.h): its lines share the framework's
// level, sink and "WARNING:est:" format, unless a checkpoint-specific sink is installed.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/log.h"
#include "ops/logging.h"

namespace {

struct Captured {
  std::vector<std::string> lines;
  est::log::Sink previous;
  est::log::Level previous_level = est::log::level();
  Captured() {
    previous = est::log::set_sink([this](est::log::Level level, std::string_view message) {
      lines.push_back(est::log::format_line(level, message));
    });
  }
  ~Captured() {
    est::log::set_sink(std::move(previous));
    est::log::set_level(previous_level);
  }
};

}  // namespace

TEST_CASE("checkpoint log lines go through est::log") {
  Captured captured;
  est::log::set_level(est::log::Level::kInfo);
  est::checkpoint::log_info("Saving checkpoints for 10 into /tmp/m/model.ckpt.");
  est::checkpoint::log_warning("Checkpoint /tmp/m/model.ckpt-5.h5 is unreadable");
  est::checkpoint::log_error("e");
  REQUIRE(captured.lines.size() == 3);
  CHECK(captured.lines[0] == "INFO:est:Saving checkpoints for 10 into /tmp/m/model.ckpt.");
  CHECK(captured.lines[1] == "WARNING:est:Checkpoint /tmp/m/model.ckpt-5.h5 is unreadable");
  CHECK(captured.lines[2] == "ERROR:est:e");

  // The level filters them too.
  est::log::set_level(est::log::Level::kError);
  est::checkpoint::log_info("dropped");
  est::checkpoint::log_warning("dropped");
  CHECK(captured.lines.size() == 3);
}

TEST_CASE("a checkpoint sink still takes precedence") {
  Captured captured;
  std::vector<std::string> own;
  auto previous = est::checkpoint::set_log_sink(
      [&](est::checkpoint::LogSeverity, const std::string& message) { own.push_back(message); });
  est::checkpoint::log_warning("mine");
  est::checkpoint::set_log_sink(std::move(previous));
  est::checkpoint::log_warning("shared");
  CHECK(own == std::vector<std::string>{"mine"});
  REQUIRE(captured.lines.size() == 1);
  CHECK(captured.lines[0] == "WARNING:est:shared");
}
