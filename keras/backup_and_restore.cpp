// keras.callbacks.BackupAndRestore (Keras 2.11+); see backup_and_restore.h.
#include "keras/backup_and_restore.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "checkpoint/backup_and_restore.h"
#include "checkpoint/reader.h"
#include "distribute/strategy.h"
#include "estimator/hooks/session_run_hook.h"
#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {
namespace {

// Keras's WorkerTrainingState variables _ckpt_saved_epoch and _ckpt_saved_batch.
constexpr const char* kEpochBlob = "keras/backup_and_restore/epoch";
constexpr const char* kBatchBlob = "keras/backup_and_restore/batch";

int64_t read_counter(const checkpoint::TensorBundle& bundle, const char* name,
                     const std::string& path) {
  const checkpoint::Blob* blob = bundle.find_blob(name);
  int64_t value = 0;
  if (blob != nullptr) {
    const char* end = blob->bytes.data() + blob->bytes.size();
    auto [stop, error] = std::from_chars(blob->bytes.data(), end, value);
    if (error == std::errc() && stop == end) return value;
  }
  throw DataLossError(
      fmt::format("BackupAndRestore: the backup {} has no readable {}: it was not written by "
                  "keras::BackupAndRestore; delete the backup directory to start afresh",
                  path, name));
}

RunConfig task_config(Model& model) {
  RunConfig config = model.config();
  return config.read_tf_config ? config.with_tf_config() : config;
}

}  // namespace

BackupAndRestore::BackupAndRestore(std::string backup_dir, SaveFreq save_freq,
                                   bool delete_checkpoint)
    : backup_dir_(std::move(backup_dir)), delete_checkpoint_(delete_checkpoint) {
  if (backup_dir_.empty())
    throw InvalidArgumentError(
        "BackupAndRestore: empty `backup_dir` argument passed; give the "
        "directory where the training state is backed up");
  save_freq_ = batches_or_epoch(save_freq, "BackupAndRestore: save_freq");
}

BackupAndRestore::~BackupAndRestore() = default;

void BackupAndRestore::on_train_begin(const Logs&) {
  if (model() == nullptr)
    throw FailedPreconditionError("BackupAndRestore: no model; pass it in FitOptions::callbacks");
  RunConfig config = task_config(*model());
  is_chief_ = config.is_chief;
  backup_ = std::make_unique<checkpoint::BackupAndRestore>(
      checkpoint::BackupAndRestoreOptions{.backup_dir = backup_dir_,
                                          .delete_checkpoint = delete_checkpoint_,
                                          .is_chief = config.is_chief,
                                          .task_id = config.task_id});
  last_batch_seen_ = 0;
  batches_since_save_ = 0;
  restore();
  // Every worker's train() restores from model_dir: the chief's copy of the backup goes first.
  if (distribute::Strategy* strategy = model()->config().train_distribute.get())
    strategy->barrier("BackupAndRestore's restore");
}

void BackupAndRestore::restore() {
  std::optional<std::string> latest = checkpoint::latest_checkpoint(backup_dir_);
  if (!latest) return;
  checkpoint::TensorBundle state = checkpoint::load(*latest);
  int64_t epoch = read_counter(state, kEpochBlob, *latest);
  int64_t batch = read_counter(state, kBatchBlob, *latest);
  // The learning rate a callback had set lives in the state (float32, as Keras's variable).
  if (const checkpoint::TensorEntry* rate = state.find("learning_rate")) {
    double saved = rate->value.item();
    if (static_cast<float>(model()->learning_rate()) != static_cast<float>(saved))
      model()->set_learning_rate(saved);
  }
  RunConfig config = task_config(*model());
  checkpoint::CheckpointManager model_dir({.directory = model()->config().model_dir,
                                           .keep_checkpoint_max = 0,
                                           .is_chief = config.is_chief,
                                           .task_id = config.task_id,
                                           .async = false});
  model_dir.save(state);
  // Keras's maybe_load_initial_counters_from_ckpt: after an epoch's backup the next epoch; after
  // a batch's, the same epoch from the next batch (fit moves on when that was the last one).
  if (batch < 0)
    model()->resume_from = Model::InitialCounters{static_cast<int>(epoch) + 1, 0};
  else
    model()->resume_from = Model::InitialCounters{static_cast<int>(epoch), batch + 1};
}

void BackupAndRestore::save(checkpoint::TensorBundle state, int epoch, int64_t batch) {
  std::erase_if(state.blobs, [](const checkpoint::Blob& blob) {
    return blob.name == kEpochBlob || blob.name == kBatchBlob;
  });
  state.add_blob(kEpochBlob, std::to_string(epoch));
  state.add_blob(kBatchBlob, std::to_string(batch));
  backup_->manager().save(state);
}

int64_t BackupAndRestore::batches_since_save_after(int64_t batch) const {
  // Counting across epochs (batch numbers restart at 0).
  return batches_since_save_ + (batch <= last_batch_seen_ ? batch + 1 : batch - last_batch_seen_);
}

bool BackupAndRestore::saves_after_batch(int64_t batch) const {
  return save_freq_ != 0 && batches_since_save_after(batch) >= save_freq_;
}

bool BackupAndRestore::should_save_on_batch(int64_t batch) {
  if (save_freq_ == 0) return false;
  batches_since_save_ = batches_since_save_after(batch);
  last_batch_seen_ = batch;
  if (batches_since_save_ < save_freq_) return false;
  batches_since_save_ = 0;
  return true;
}

void BackupAndRestore::on_epoch_begin(int epoch, const Logs&) { current_epoch_ = epoch; }

void BackupAndRestore::on_train_batch_end(int64_t batch, const Logs&) {
  if (!should_save_on_batch(batch)) return;
  const Session* session = model()->training_session();
  if (session == nullptr)
    throw FailedPreconditionError(
        "BackupAndRestore: on_train_batch_end outside fit (no training session to back up)");
  save(session->checkpoint_bundle(), current_epoch_, batch);
}

void BackupAndRestore::on_epoch_end(int epoch, const Logs&) {
  if (save_freq_ != 0) return;
  // The Estimator saved the epoch's last step into model_dir before on_epoch_end (the chief's:
  // another task's save is discarded, and it may find none yet).
  const std::string& model_dir = model()->config().model_dir;
  if (!is_chief_ && !checkpoint::latest_checkpoint(model_dir)) return;
  save(checkpoint::load(model_dir), epoch, -1);
}

void BackupAndRestore::on_train_end(const Logs&) {
  if (backup_) backup_->on_train_end();
  backup_.reset();
}

}  // namespace est::keras
