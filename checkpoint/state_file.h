// The `checkpoint` state file, TensorFlow's CheckpointState message in protobuf text format
// (checkpoint/proto/checkpoint_state.proto, read and written with TextFormat), so that
// tf.train.latest_checkpoint-style tooling and people reading the directory find their way:
//
//   model_checkpoint_path: "model.ckpt-200.h5"
//   all_model_checkpoint_paths: "model.ckpt-100.h5"        (oldest first)
//   all_model_checkpoint_paths: "model.ckpt-200.h5"
//   all_model_checkpoint_timestamps: 1700000000
//   all_model_checkpoint_timestamps: 1700000600.5
//   last_preserved_timestamp: 1699999000
//
// Paths inside the directory are stored relative to it, as TensorFlow does. The file is
// replaced atomically (temporary file, fsync, rename, fsync directory).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace est::checkpoint {

inline constexpr const char* kStateFileName = "checkpoint";

struct CheckpointState {
  std::string model_checkpoint_path;                    // the newest, as stored
  std::vector<std::string> all_model_checkpoint_paths;  // kept checkpoints, oldest first
  std::vector<double> all_model_checkpoint_timestamps;  // seconds since the epoch, one per path
  double last_preserved_timestamp = 0;                  // for keep_checkpoint_every_n_hours
};

std::string format_checkpoint_state(const CheckpointState& state);
// DataLossError naming `where` and the line when the text is not a CheckpointState, and
// naming `where` when it has no model_checkpoint_path (an empty file: TensorFlow's "Invalid
// checkpoint state"). Unknown fields are skipped, as protobuf readers do.
CheckpointState parse_checkpoint_state(std::string_view text, const std::string& where);

// nullopt when the directory has no state file; the errors of parse_checkpoint_state.
std::optional<CheckpointState> read_checkpoint_state(const std::string& directory);
void write_checkpoint_state(const std::string& directory, const CheckpointState& state);

// A stored path made usable: relative paths are joined to the directory.
std::string resolve_in_directory(const std::string& directory, const std::string& stored_path);

// The est checkpoint file that a stored path names: the path resolved, or `<that>.h5` when
// the path is a TensorFlow checkpoint prefix whose est file is beside it. A model directory
// saved with RunConfig::tf_checkpoint_format records the prefix (model.ckpt-200), so that
// TensorFlow's tf.train.latest_checkpoint lands on model.ckpt-200.index, and est's readers
// find model.ckpt-200.h5 through this.
std::string est_checkpoint_path(const std::string& directory, const std::string& stored_path);

// Like tf.train.latest_checkpoint: the newest checkpoint's est file (est_checkpoint_path), or
// nullopt when the directory has no state file or the file it names does not exist.
std::optional<std::string> latest_checkpoint(const std::string& directory);

// Every checkpoint the state file lists, newest first: the order in which restore tries
// them. Empty when there is no state file.
std::vector<std::string> checkpoint_candidates(const std::string& directory);

}  // namespace est::checkpoint
