// keras.callbacks.ModelCheckpoint (Keras 2.x keras/callbacks.py): saves the model or its
// weights during fit.
//
// filepath is formatted as Python's str.format with epoch (1-based), batch (1-based, when
// saving by batches) and the logs: "weights.{epoch:02d}-{val_loss:.2f}.keras". A field that is
// neither is an InvalidArgumentError naming it and the logs there. save_weights_only writes
// model.save_weights (the path must end in .weights.h5), otherwise model.save (.keras or .h5).
// save_freq "epoch" saves at each epoch end; an integer N saves every N batches (counted across
// epochs). save_best_only saves only when the monitor improves on the best so far (mode "auto":
// maximise a monitor containing "acc" or starting with "fmeasure", else minimise), starting
// from initial_value_threshold when given; a monitor missing from the logs is a warning.
// Under a strategy of several workers (MultiWorkerMirroredStrategy from TF_CONFIG) every worker
// saves at the same batches, the chief to the formatted path and every other worker to
// <its directory>/workertemp_<task_id>/, deleted right after (Keras's write_filepath), so the
// chief's files alone stay (model.save and save_weights create the directories they need).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "keras/callbacks.h"

namespace est::keras {

struct ModelCheckpointOptions {
  std::string filepath;
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = false;
  std::string mode = "auto";  // "auto", "min", "max"
  std::variant<std::string, int64_t> save_freq = std::string("epoch");
  std::optional<double> initial_value_threshold;
};

// Python's str.format over named int and float fields ("{epoch:02d}", "{val_loss:.2f}").
// InvalidArgumentError naming an unknown field or a bad format spec.
std::string format_filepath(const std::string& pattern, const std::map<std::string, int64_t>& ints,
                            const Logs& logs);

class ModelCheckpoint : public Callback {
 public:
  // InvalidArgumentError for a filepath not ending in .weights.h5 (save_weights_only) or
  // .keras / .h5, an unknown mode, or a save_freq that is neither "epoch" nor a positive
  // integer (Keras 3's checks).
  explicit ModelCheckpoint(ModelCheckpointOptions options);

  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

  double best() const { return best_; }

 private:
  void save(int epoch, std::optional<int64_t> batch, const Logs& logs);
  // Whether to write `path` now: always, or with save_best_only when the monitor improved on
  // the best (which it then becomes); prints Keras's verbose lines.
  bool should_write(int epoch, const Logs& logs, const std::string& path);

  ModelCheckpointOptions options_;
  bool maximize_ = false;
  double best_ = 0;
  int64_t every_batches_ = 0;  // 0: each epoch
  int current_epoch_ = 0;
  int64_t batches_since_save_ = 0;
  int64_t last_batch_seen_ = 0;
};

}  // namespace est::keras
