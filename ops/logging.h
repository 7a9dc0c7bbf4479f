// The framework's log: TensorFlow-style lines ("INFO:est:loss = 2.33, step = 100 (0.500 sec)")
// through fmt, filtered by a process-wide level.
//
// Shaped as a handful of free functions in est::log rather than a logger object: every folder
// logs, nobody should have to thread a logger through constructors. The level defaults to the
// environment variable EST_LOG_LEVEL (DEBUG/INFO/WARNING/ERROR, any case, or 0-3) and can be
// changed at run time; a sink can replace stderr so that tests capture the lines. Formatting is
// checked at compile time (fmt::format_string) and skipped when the level filters the line out.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace est::log {

enum class Level { kDebug, kInfo, kWarning, kError };

// Lines below `level` are dropped (before formatting). Thread-safe.
void set_level(Level level);
Level level();
inline bool enabled(Level line_level) { return line_level >= level(); }

// "DEBUG", "INFO", "WARNING", "ERROR".
std::string_view level_name(Level level);

// DEBUG/INFO/WARNING/ERROR in any case, or "0".."3" (in that order); nullopt otherwise.
std::optional<Level> parse_level(std::string_view text);

// Re-reads EST_LOG_LEVEL and sets the level from it (INFO when unset or empty). An unknown value
// logs one warning per process and uses INFO. Called once on first use; tests call it again.
Level set_level_from_environment();

// Where lines go: receives the level and the message (without the "INFO:est:" prefix). An empty
// sink restores the default, which writes format_line(...) + '\n' to stderr. Returns the previous
// sink. Sinks are called under the log's lock, one line at a time: a sink must not log itself.
using Sink = std::function<void(Level level, std::string_view message)>;
Sink set_sink(Sink sink);

// "INFO:est:<message>", the default sink's line.
std::string format_line(Level level, std::string_view message);

// Sends one already formatted message, if `line_level` passes the level filter.
void write(Level line_level, std::string_view message);

template <class... Args>
void print(Level line_level, fmt::format_string<Args...> format, Args&&... args) {
  if (!enabled(line_level)) return;
  write(line_level, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  print(Level::kDebug, format, std::forward<Args>(args)...);
}

template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  print(Level::kInfo, format, std::forward<Args>(args)...);
}

template <class... Args>
void warning(fmt::format_string<Args...> format, Args&&... args) {
  print(Level::kWarning, format, std::forward<Args>(args)...);
}

template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  print(Level::kError, format, std::forward<Args>(args)...);
}

}  // namespace est::log
