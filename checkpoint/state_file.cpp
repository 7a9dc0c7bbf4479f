// CheckpointState text format through protobuf's TextFormat (the message is
// checkpoint/proto/checkpoint_state.proto, TensorFlow's fields), and latest_checkpoint().
//
// Reading follows tf.train.get_checkpoint_state (tensorflow/python/training/
// checkpoint_management.py): text_format.Merge, so unknown fields are skipped and a repeated
// singular field keeps its last value, and a state naming no model_checkpoint_path (an empty
// file) is an error ("Invalid checkpoint state") rather than "no checkpoint yet".
#include "checkpoint/state_file.h"

#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/file_util.h"
#include "checkpoint_state.pb.h"
#include "ops/error.h"

namespace est::checkpoint {
namespace {

namespace pb = est::checkpoint::proto;

// Keeps the first error TextFormat reports, with its (1-based) line and column.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!message_.empty()) return;
    line_ = line + 1;
    column_ = column + 1;
    message_ = message;
  }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// The text of line `number` (1-based), for messages.
std::string line_of(std::string_view text, int number) {
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int i = 0; i < number; ++i)
    if (!std::getline(lines, line)) return "";
  return line;
}

}  // namespace

std::string format_checkpoint_state(const CheckpointState& state) {
  pb::CheckpointState message;
  message.set_model_checkpoint_path(state.model_checkpoint_path);
  for (const std::string& path : state.all_model_checkpoint_paths)
    message.add_all_model_checkpoint_paths(path);
  for (double timestamp : state.all_model_checkpoint_timestamps)
    message.add_all_model_checkpoint_timestamps(timestamp);
  message.set_last_preserved_timestamp(state.last_preserved_timestamp);
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(message, &text))
    throw InternalError("formatting the checkpoint state as protobuf text failed");
  return text;
}

CheckpointState parse_checkpoint_state(std::string_view text, const std::string& where) {
  pb::CheckpointState message;
  FirstError error;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&error);
  parser.AllowUnknownField(true);
  if (!parser.MergeFromString(std::string(text), &message)) {
    std::string message = error.message();
    while (!message.empty() && message.back() == '.') message.pop_back();
    std::string detail = message.empty()
                             ? std::string("is not a CheckpointState")
                             : fmt::format("line {} column {} (\"{}\"): {}", error.line(),
                                           error.column(), line_of(text, error.line()), message);
    throw DataLossError(fmt::format(
        "{} {}; the state file is damaged: delete it and pass a checkpoint file explicitly, or "
        "rewrite it",
        where, detail));
  }
  if (message.model_checkpoint_path().empty())
    throw DataLossError(fmt::format(
        "Invalid checkpoint state loaded from {}: it names no model_checkpoint_path ({}). The "
        "checkpoints beside it were left alone: to resume from one, write "
        "model_checkpoint_path: \"model.ckpt-<step>.h5\" into it (est-ckpt --verify on the "
        "directory lists them); to start afresh, delete the state file and the checkpoints",
        where,
        text.find_first_not_of(" \t\r\n") == std::string_view::npos ? "the file is empty"
                                                                    : "the field is missing"));
  CheckpointState state;
  state.model_checkpoint_path = message.model_checkpoint_path();
  state.all_model_checkpoint_paths.assign(message.all_model_checkpoint_paths().begin(),
                                          message.all_model_checkpoint_paths().end());
  state.all_model_checkpoint_timestamps.assign(message.all_model_checkpoint_timestamps().begin(),
                                               message.all_model_checkpoint_timestamps().end());
  state.last_preserved_timestamp = message.last_preserved_timestamp();
  // As TensorFlow does: the newest is always among the kept paths.
  if (state.all_model_checkpoint_paths.empty() ||
      state.all_model_checkpoint_paths.back() != state.model_checkpoint_path)
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  return state;
}

std::optional<CheckpointState> read_checkpoint_state(const std::string& directory) {
  std::filesystem::path path = std::filesystem::path(directory) / kStateFileName;
  std::error_code is_directory_error;
  if (std::filesystem::is_directory(path, is_directory_error))  // opens, then reads as empty
    throw FailedPreconditionError(fmt::format(
        "The state file {} is a directory, not a file: the checkpoints beside it cannot be "
        "found through it. Move that directory away (TensorFlow's state file `checkpoint` is a "
        "text file written by training)",
        path.string()));
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

std::string est_checkpoint_path(const std::string& directory, const std::string& stored_path) {
  std::string path = resolve_in_directory(directory, stored_path);
  std::error_code error;
  if (!path.ends_with(".h5") && !std::filesystem::exists(path, error) &&
      std::filesystem::exists(path + ".h5", error))
    return path + ".h5";
  return path;
}

std::optional<std::string> latest_checkpoint(const std::string& directory) {
  std::optional<CheckpointState> state = read_checkpoint_state(directory);
  if (!state || state->model_checkpoint_path.empty()) return std::nullopt;
  std::string path = est_checkpoint_path(directory, state->model_checkpoint_path);
  std::error_code error;
  // est's file, or TensorFlow's prefix (its `.index`: tf_resume.h).
  if (!std::filesystem::exists(path, error) && !std::filesystem::exists(path + ".index", error))
    return std::nullopt;
  return path;
}

std::vector<std::string> checkpoint_candidates(const std::string& directory) {
  std::vector<std::string> candidates;
  std::optional<CheckpointState> state = read_checkpoint_state(directory);
  if (!state) return candidates;
  const auto& paths = state->all_model_checkpoint_paths;
  for (auto it = paths.rbegin(); it != paths.rend(); ++it)
    candidates.push_back(est_checkpoint_path(directory, *it));
  return candidates;
}

}  // namespace est::checkpoint
