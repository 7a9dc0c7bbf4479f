// Log lines of the checkpoint code, in TensorFlow's format
// ("W1025 14:03:12.123456 4242 checkpoint] Checkpoint ... is unreadable ...").
//
// checkpoint/ writes through these functions, which forward to est::log (ops/logging.h) unless
// a sink set with set_log_sink() takes the lines (tests do that).
#pragma once

#include <functional>
#include <string>

namespace est::checkpoint {

enum class LogSeverity { kInfo, kWarning, kError };

using LogSink = std::function<void(LogSeverity severity, const std::string& message)>;

// Replaces where log lines go; an empty sink restores the default (stderr). Returns the
// previous sink.
LogSink set_log_sink(LogSink sink);

void log(LogSeverity severity, const std::string& message);
inline void log_info(const std::string& message) { log(LogSeverity::kInfo, message); }
inline void log_warning(const std::string& message) { log(LogSeverity::kWarning, message); }
inline void log_error(const std::string& message) { log(LogSeverity::kError, message); }

// The default sink's line: severity letter, date, time, thread id, source, message.
std::string format_log_line(LogSeverity severity, const std::string& message);

}  // namespace est::checkpoint
