// CheckpointState text format: writing, a small parser for the fields TensorFlow writes, and
// latest_checkpoint().
#include "checkpoint/state_file.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/file_util.h"
#include "ops/error.h"

namespace est::checkpoint {
namespace {

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string number(double value) { return fmt::format("{:.6f}", value); }

class LineParser {
 public:
  LineParser(std::string_view line, std::string where) : line_(line), where_(std::move(where)) {}

  std::string_view key() {
    size_t colon = line_.find(':');
    if (colon == std::string_view::npos) fail("expected \"field: value\"");
    std::string_view key = trim(line_.substr(0, colon));
    rest_ = trim(line_.substr(colon + 1));
    return key;
  }

  std::string string_value() {
    if (rest_.size() < 2 || (rest_.front() != '"' && rest_.front() != '\'') ||
        rest_.back() != rest_.front())
      fail("expected a quoted string");
    std::string out;
    std::string_view body = rest_.substr(1, rest_.size() - 2);
    for (size_t i = 0; i < body.size(); ++i) {
      char c = body[i];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++i == body.size()) fail("string ends in a backslash");
      switch (body[i]) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        default:
          out += body[i];  // \" \\ \'
      }
    }
    return out;
  }

  double number_value() {
    double value = 0;
    auto [end, error] = std::from_chars(rest_.data(), rest_.data() + rest_.size(), value);
    if (error != std::errc() || end != rest_.data() + rest_.size()) fail("expected a number");
    return value;
  }

 private:
  static std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
      text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.remove_suffix(1);
    return text;
  }
  [[noreturn]] void fail(std::string_view what) const {
    throw DataLossError(fmt::format(
        "{}: {} in \"{}\"; the state file is damaged: delete it and pass a checkpoint file "
        "explicitly, or rewrite it",
        where_, what, line_));
  }

  std::string_view line_;
  std::string_view rest_;
  std::string where_;
};

}  // namespace

std::string format_checkpoint_state(const CheckpointState& state) {
  std::string out = fmt::format("model_checkpoint_path: {}\n", quote(state.model_checkpoint_path));
  for (const std::string& path : state.all_model_checkpoint_paths)
    out += fmt::format("all_model_checkpoint_paths: {}\n", quote(path));
  for (double timestamp : state.all_model_checkpoint_timestamps)
    out += fmt::format("all_model_checkpoint_timestamps: {}\n", number(timestamp));
  out += fmt::format("last_preserved_timestamp: {}\n", number(state.last_preserved_timestamp));
  return out;
}

CheckpointState parse_checkpoint_state(std::string_view text, const std::string& where) {
  CheckpointState state;
  std::istringstream lines{std::string(text)};
  std::string line;
  int number_of_line = 0;
  while (std::getline(lines, line)) {
    ++number_of_line;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line.starts_with('#')) continue;
    LineParser parser(line, fmt::format("{} line {}", where, number_of_line));
    std::string_view key = parser.key();
    if (key == "model_checkpoint_path")
      state.model_checkpoint_path = parser.string_value();
    else if (key == "all_model_checkpoint_paths")
      state.all_model_checkpoint_paths.push_back(parser.string_value());
    else if (key == "all_model_checkpoint_timestamps")
      state.all_model_checkpoint_timestamps.push_back(parser.number_value());
    else if (key == "last_preserved_timestamp")
      state.last_preserved_timestamp = parser.number_value();
  }
  // As TensorFlow does: the newest is always among the kept paths.
  if (!state.model_checkpoint_path.empty() &&
      (state.all_model_checkpoint_paths.empty() ||
       state.all_model_checkpoint_paths.back() != state.model_checkpoint_path))
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  return state;
}

std::optional<CheckpointState> read_checkpoint_state(const std::string& directory) {
  std::filesystem::path path = std::filesystem::path(directory) / kStateFileName;
  std::ifstream file(path);
  if (!file) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) return std::nullopt;
    throw UnavailableError(
        fmt::format("Cannot read the state file {}; check its permissions", path.string()));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return parse_checkpoint_state(contents.str(), path.string());
}

void write_checkpoint_state(const std::string& directory, const CheckpointState& state) {
  write_file_durably(std::filesystem::path(directory) / kStateFileName,
                     format_checkpoint_state(state));
}

std::string resolve_in_directory(const std::string& directory, const std::string& stored_path) {
  std::filesystem::path path(stored_path);
  if (path.is_absolute()) return stored_path;
  return (std::filesystem::path(directory) / path).string();
}

std::optional<std::string> latest_checkpoint(const std::string& directory) {
  std::optional<CheckpointState> state = read_checkpoint_state(directory);
  if (!state || state->model_checkpoint_path.empty()) return std::nullopt;
  std::string path = resolve_in_directory(directory, state->model_checkpoint_path);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  return path;
}

std::vector<std::string> checkpoint_candidates(const std::string& directory) {
  std::vector<std::string> candidates;
  std::optional<CheckpointState> state = read_checkpoint_state(directory);
  if (!state) return candidates;
  const auto& paths = state->all_model_checkpoint_paths;
  for (auto it = paths.rbegin(); it != paths.rend(); ++it)
    candidates.push_back(resolve_in_directory(directory, *it));
  return candidates;
}

}  // namespace est::checkpoint
