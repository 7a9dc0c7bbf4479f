// The checkpoint log: one replaceable sink; by default its lines go to the framework's log
// (ops/logging.h), so they share its level, its sink and its "INFO:est:" format.
#include "checkpoint/log.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "ops/logging.h"

namespace est::checkpoint {
namespace {

// Leaked on purpose: background saves may log during process exit, after static
// destructors have started to run.
std::mutex& sink_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

LogSink& current_sink() {
  static auto* sink = new LogSink;
  return *sink;
}

char severity_letter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return 'I';
    case LogSeverity::kWarning:
      return 'W';
    case LogSeverity::kError:
      return 'E';
  }
  return 'I';
}

est::log::Level to_log_level(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return est::log::Level::kInfo;
    case LogSeverity::kWarning:
      return est::log::Level::kWarning;
    case LogSeverity::kError:
      return est::log::Level::kError;
  }
  return est::log::Level::kInfo;
}

}  // namespace

std::string format_log_line(LogSeverity severity, const std::string& message) {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm local{};
  localtime_r(&seconds, &local);
  return fmt::format("{}{:02}{:02} {:02}:{:02}:{:02}.{:06} {} checkpoint] {}",
                     severity_letter(severity), local.tm_mon + 1, local.tm_mday, local.tm_hour,
                     local.tm_min, local.tm_sec, micros, static_cast<long>(::syscall(SYS_gettid)),
                     message);
}

LogSink set_log_sink(LogSink sink) {
  std::lock_guard lock(sink_mutex());
  LogSink previous = std::move(current_sink());
  current_sink() = std::move(sink);
  return previous;
}

void log(LogSeverity severity, const std::string& message) {
  std::lock_guard lock(sink_mutex());
  if (current_sink()) {
    current_sink()(severity, message);
    return;
  }
  est::log::write(to_log_level(severity), message);
}

}  // namespace est::checkpoint
