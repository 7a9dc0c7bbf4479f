// tf.train.Checkpoint and tf.train.CheckpointManager for Keras models (TensorFlow's
// tensorflow/python/checkpoint/checkpoint.py and checkpoint_management.py), on est's checkpoint
// format: a checkpoint "<dir>/ckpt-3" is the file "<dir>/ckpt-3.h5" (checkpoint/FORMAT.md), and
// the directory's `checkpoint` state file records the prefixes ("ckpt-3") as TensorFlow does.
//
//   keras::Checkpoint checkpoint({.model = &model, .optimizer = &*model.optimizer()});
//   keras::CheckpointManager manager(checkpoint, "/tmp/ckpt", /*max_to_keep=*/1);
//   std::string path = manager.save();              // "/tmp/ckpt/ckpt-1"
//   checkpoint.restore(*keras::latest_checkpoint("/tmp/ckpt"));
//
// A checkpoint holds the model's weights and, when the optimizer is given, its slots and the
// step (Keras's iterations), plus the checkpoint's save_counter. Restoring writes them into the
// model's own state (its model_dir), so fit continues from them.
//
// Checkpoint::save(prefix) numbers with save_counter ("<prefix>-<n>", n from 1) and makes the
// state file name only that checkpoint; write(prefix) writes without either. CheckpointManager
// numbers with save_counter unless given a number, keeps max_to_keep checkpoints (nullopt: all;
// with keep_checkpoint_every_n_hours, one per that many hours is left on disk), deletes the
// older ones, records the kept ones (oldest first) and their timestamps in the state file, and
// picks up the kept list of a directory it finds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/compile.h"

namespace est::keras {

class Model;

struct CheckpointObjects {
  Model* model = nullptr;
  // The model's optimizer (model->optimizer()), to include its state; null leaves it out.
  const Optimizer* optimizer = nullptr;
};

class Checkpoint {
 public:
  // InvalidArgumentError when there is no model, or the optimizer is not the model's.
  explicit Checkpoint(CheckpointObjects objects);

  std::string save(const std::string& file_prefix);
  std::string write(const std::string& file_prefix);
  // A path save/write returned (or its ".h5" file). NotFoundError naming it when absent; an
  // empty path restores nothing, as TensorFlow's restore(None).
  void restore(const std::string& save_path);

  int64_t save_counter() const { return save_counter_; }
  void set_save_counter(int64_t value) { save_counter_ = value; }

 private:
  CheckpointObjects objects_;
  int64_t save_counter_ = 0;
};

// tf.train.latest_checkpoint: the newest checkpoint's prefix that the directory's state file
// names, when its file exists.
std::optional<std::string> latest_checkpoint(const std::string& directory);

class CheckpointManager {
 public:
  // InvalidArgumentError for max_to_keep <= 0 (use nullopt to keep all).
  CheckpointManager(Checkpoint& checkpoint, std::string directory, std::optional<int> max_to_keep,
                    std::string checkpoint_name = "ckpt",
                    std::optional<double> keep_checkpoint_every_n_hours = std::nullopt);

  std::string save(std::optional<int64_t> checkpoint_number = std::nullopt);
  const std::optional<std::string>& latest_checkpoint() const { return latest_; }
  // The kept checkpoints' prefixes, oldest first.
  std::vector<std::string> checkpoints() const;
  const std::string& directory() const { return directory_; }

 private:
  void record_state() const;
  void sweep();

  Checkpoint& checkpoint_;
  std::string directory_;
  std::optional<int> max_to_keep_;
  std::string prefix_;
  std::optional<double> keep_every_hours_;
  std::vector<std::pair<std::string, double>> kept_;  // prefix, timestamp; oldest first
  double last_preserved_ = 0;
  std::optional<std::string> latest_;
};

}  // namespace est::keras
