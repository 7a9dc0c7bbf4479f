// CheckpointManager: the periodic-save side of checkpointing, used by the Estimator's
// CheckpointSaverHook (TensorFlow's tf.train.CheckpointManager plus Saver's retention).
//
// save() snapshots a bundle and writes "<checkpoint_name>-<step>.h5" in the background (one
// save in flight; a second save waits for the first), then atomically rewrites the
// `checkpoint` state file and deletes checkpoints that fall out of retention:
// keep_checkpoint_max newest are kept (0 keeps all), and with keep_checkpoint_every_n_hours
// one checkpoint per that many hours is preserved (left on disk, dropped from the state file),
// as TensorFlow does. Time comes from a Clock, so tests drive retention with a fake one. With
// tf_checkpoint_format, each checkpoint is also written as TensorFlow's own.
//
// In a multi-worker job only the chief writes the real directory. Other tasks write their
// checkpoint to "<directory>/workertemp_<task_id>" and delete that directory afterwards (the
// Keras multi-worker recipe), so no two tasks ever write one file; every task restores from
// the real directory.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/async_writer.h"
#include "checkpoint/bundle.h"
#include "checkpoint/restore.h"
#include "checkpoint/state_file.h"

namespace est::checkpoint {

using Clock = std::function<double()>;  // seconds since the epoch
double system_clock_seconds();

struct CheckpointManagerOptions {
  std::string directory;  // the model directory
  std::string checkpoint_name = "model.ckpt";
  int keep_checkpoint_max = 5;               // 0 keeps every checkpoint
  double keep_checkpoint_every_n_hours = 0;  // 0: off
  bool is_chief = true;
  int task_id = 0;
  bool async = true;  // write in the background
  Clock clock;        // empty: the system clock
  // Also write each checkpoint in TensorFlow's V2 format beside est's (tf_bundle_writer.h):
  // model.ckpt-<step>.index + .data-00000-of-00001, in the same background job, deleted with
  // it by retention. The state file then records the TensorFlow prefix (model.ckpt-<step>), so
  // that tf.train.latest_checkpoint(directory) names it; est finds its .h5 beside it
  // (est_checkpoint_path). The chief's only: workers' checkpoints are temporary.
  bool tf_checkpoint_format = false;
};

class CheckpointManager {
 public:
  // The chief creates the directory, removes temporary files that an interrupted save left
  // behind, and resumes the retention state from an existing state file.
  explicit CheckpointManager(CheckpointManagerOptions options);
  ~CheckpointManager();  // waits for the save in progress
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Saves `bundle` as the checkpoint of bundle.global_step and returns the path it will have.
  // Invalid bundles throw here; I/O errors of a background save are rethrown by the next
  // save() or wait().
  std::string save(const TensorBundle& bundle);
  // Blocks until every save has finished; rethrows a background error.
  void wait();

  // Restores the latest readable checkpoint of the real directory into `into` (after waiting
  // for pending saves); nullopt when there is none yet. See restore_into().
  std::optional<RestoreResult> restore(TensorBundle& into, const RestoreOptions& options = {});

  std::optional<std::string> latest_checkpoint() const;  // in the real directory
  // Paths of the checkpoints under retention, oldest first (chief only; empty on workers).
  std::vector<std::string> checkpoints() const;
  double last_preserved_timestamp() const;

  const std::string& directory() const { return options_.directory; }
  const std::string& write_directory() const { return write_directory_; }
  const CheckpointManagerOptions& options() const { return options_; }

 private:
  struct Kept {
    std::string file_name;  // relative to the directory, as the state file records it
    double timestamp = 0;
  };

  double now() const;
  void recover_state();
  void write(const TensorBundle& bundle, const std::string& file_name, double timestamp);
  void write_as_chief(const TensorBundle& bundle, const std::string& file_name, double timestamp);
  void delete_checkpoint(const std::string& stored_name) const;
  void write_as_worker(const TensorBundle& bundle, const std::string& file_name, double timestamp);

  CheckpointManagerOptions options_;
  std::string write_directory_;
  mutable std::mutex mutex_;  // guards kept_ and last_preserved_
  std::vector<Kept> kept_;    // oldest first
  double last_preserved_ = 0;
  std::unique_ptr<AsyncWriter> writer_;  // last: destroyed (drained) first
};

}  // namespace est::checkpoint
