// keras.callbacks.BackupAndRestore, Keras 2.11+ semantics (keras/callbacks.py BackupAndRestore,
// keras/distribute/worker_training_state.py, keras/distribute/distributed_file_utils.py).
//
// Backs the training state up into backup_dir: at each epoch end (save_freq "epoch") or every
// save_freq batches (counted as Keras's _should_save_on_batch does). The state is est's
// checkpoint bundle of the running fit (variables, optimizer slots and learning rate, global
// step, RNG states, input position) plus Keras's _ckpt_saved_epoch/_ckpt_saved_batch as blobs.
// When fit starts and backup_dir holds a backup, the previous fit was interrupted: the backup
// becomes the newest checkpoint of the model's model_dir (which the Estimator restores from),
// and fit resumes at the epoch after the saved one, or, when saved mid-epoch, in the same
// epoch after the saved batch: that epoch runs only its remaining steps (Keras 2.11+'s
// initial_step), and since the input position is restored the same batches follow as in an
// uninterrupted fit. When fit ends normally the backup is deleted (delete_checkpoint); an
// exception leaves it in place.
//
// Multi-worker (MultiWorkerMirroredStrategy through config().train_distribute and TF_CONFIG):
// the task fields come from the model's RunConfig read as the Estimator reads it (is_chief,
// task_id). Every task backs up at the same batches (they run in lockstep) but only the chief
// writes backup_dir; the others write <backup_dir>/workertemp_<task_id> and delete it
// (Keras's write_filepath), through checkpoint::BackupAndRestore's manager, and at the end the
// chief deletes its backup and the last task out the directory. When fit starts every task
// reads the chief's backup and sets the same resume point; the copy into the (shared)
// model_dir is the chief's alone (the others' go to workertemp_* and are deleted), and the
// workers wait for it (a barrier at the end of on_train_begin) before their train() restores.
// For an integer save_freq the backup is the running session's state after the batch; its
// workers' input positions are gathered only at steps announced before they run, so
// saves_after_batch says which batches save and fit's EpochHook announces them
// (SessionRunHook::will_save_after). Per-epoch backups read the epoch's checkpoint, which the
// Estimator saved at the epoch's end with the positions. With fit's one session, an epoch
// resumed mid-way runs as a train() of its own (training.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "keras/callbacks.h"

namespace est::checkpoint {
class BackupAndRestore;
struct TensorBundle;
}  // namespace est::checkpoint

namespace est::keras {

class BackupAndRestore : public Callback {
 public:
  // save_freq: "epoch", or a positive number of batches.
  using SaveFreq = BatchFrequency;
  explicit BackupAndRestore(std::string backup_dir, SaveFreq save_freq = std::string("epoch"),
                            bool delete_checkpoint = true);
  ~BackupAndRestore() override;

  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  bool saves_after_batch(int64_t batch) const override;

 private:
  // Restores a backup into the model's model_dir and sets where fit resumes.
  void restore();
  // `batch` -1: saved at the end of `epoch`.
  void save(checkpoint::TensorBundle state, int epoch, int64_t batch);
  bool should_save_on_batch(int64_t batch);
  // The batches since the last save once `batch` has run.
  int64_t batches_since_save_after(int64_t batch) const;

  std::string backup_dir_;
  int64_t save_freq_ = 0;  // 0: "epoch"
  bool delete_checkpoint_;
  bool is_chief_ = true;
  std::unique_ptr<checkpoint::BackupAndRestore> backup_;
  int current_epoch_ = 0;
  int64_t last_batch_seen_ = 0;
  int64_t batches_since_save_ = 0;
};

}  // namespace est::keras
