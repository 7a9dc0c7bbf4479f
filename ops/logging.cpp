// The log's state: level (an atomic, read on every call), sink and the lock that keeps one line
// from interleaving with another. The state is leaked on purpose: background threads (checkpoint
// writers, prefetch) may log while static destructors run at process exit.
#include "ops/logging.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace est::log {
namespace {

constexpr int kLevelUnset = -1;

std::atomic<int>& level_storage() {
  static std::atomic<int> storage{kLevelUnset};
  return storage;
}

struct SinkState {
  std::mutex mutex;
  Sink sink;
};

SinkState& sink_state() {
  static auto* state = new SinkState;
  return *state;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO";
    case Level::kWarning:
      return "WARNING";
    case Level::kError:
      return "ERROR";
  }
  return "INFO";
}

std::optional<Level> parse_level(std::string_view text) {
  constexpr Level kAll[] = {Level::kDebug, Level::kInfo, Level::kWarning, Level::kError};
  for (Level candidate : kAll) {
    if (equals_ignoring_case(text, level_name(candidate))) return candidate;
  }
  // TensorFlow's Python logging also says WARN; accept it.
  if (equals_ignoring_case(text, "WARN")) return Level::kWarning;
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3') return kAll[text[0] - '0'];
  return std::nullopt;
}

Level set_level_from_environment() {
  const char* value = std::getenv("EST_LOG_LEVEL");
  std::string_view text = value ? value : "";
  std::optional<Level> parsed = text.empty() ? Level::kInfo : parse_level(text);
  set_level(parsed.value_or(Level::kInfo));
  if (!parsed) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      warning(
          "EST_LOG_LEVEL='{}' is not a log level; using INFO. Set it to DEBUG, INFO, "
          "WARNING or ERROR (or 0-3).",
          text);
    }
  }
  return level();
}

void set_level(Level level) { level_storage().store(static_cast<int>(level)); }

Level level() {
  int value = level_storage().load(std::memory_order_relaxed);
  if (value == kLevelUnset) return set_level_from_environment();
  return static_cast<Level>(value);
}

Sink set_sink(Sink sink) {
  SinkState& state = sink_state();
  std::lock_guard lock(state.mutex);
  Sink previous = std::move(state.sink);
  state.sink = std::move(sink);
  return previous;
}

std::string format_line(Level level, std::string_view message) {
  return fmt::format("{}:est:{}", level_name(level), message);
}

void write(Level line_level, std::string_view message) {
  if (!enabled(line_level)) return;
  SinkState& state = sink_state();
  std::lock_guard lock(state.mutex);
  if (state.sink) {
    state.sink(line_level, message);
    return;
  }
  std::string line = format_line(line_level, message);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace est::log
