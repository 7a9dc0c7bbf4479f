// BackupAndRestore, with Keras's semantics: back the training state up every N steps (or at
// each epoch end) into a backup directory; when a run starts and a backup exists, the run was
// interrupted, so resume from it; when training finishes successfully, delete the backup.
//
// The state is a TensorBundle (variables, slots, global step, iterator position); the number
// of completed epochs is stored with it as the blob "backup_and_restore/epochs". Writing goes
// through a CheckpointManager keeping one checkpoint, so backups are crash-consistent and only
// the chief writes the real backup directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/manager.h"

namespace est::checkpoint {

struct BackupAndRestoreOptions {
  std::string backup_dir;
  int64_t save_freq_steps = 0;    // back up every this many global steps; 0: at epoch ends
  bool delete_checkpoint = true;  // delete backup_dir when training finishes successfully
  bool is_chief = true;
  int task_id = 0;
  bool async = true;
  Clock clock;
};

struct ResumePoint {
  RestoreResult restored;
  int64_t completed_epochs = 0;  // the epoch to resume at (0-based)
};

class BackupAndRestore {
 public:
  explicit BackupAndRestore(BackupAndRestoreOptions options);

  // At the start of training: restores the latest backup into `state` when there is one
  // (the previous run was interrupted); nullopt for a fresh start.
  std::optional<ResumePoint> restore(TensorBundle& state);
  // After each training step: backs up when state.global_step is a multiple of
  // save_freq_steps.
  void on_step_end(const TensorBundle& state);
  // After epoch `epoch` (0-based) finished: remembers it, and backs up when saving per epoch.
  void on_epoch_end(int64_t epoch, const TensorBundle& state);
  // Training finished successfully: waits for the last backup and deletes the directory. In a
  // multi-worker job the tasks finish in any order: the chief deletes its backup but leaves the
  // other workers' workertemp_* (each worker deletes its own once written), and whichever task
  // finishes last removes the then empty directory.
  void on_train_end();

  CheckpointManager& manager() { return manager_; }

 private:
  void backup(const TensorBundle& state);

  BackupAndRestoreOptions options_;
  CheckpointManager manager_;
  int64_t completed_epochs_ = 0;
};

}  // namespace est::checkpoint
