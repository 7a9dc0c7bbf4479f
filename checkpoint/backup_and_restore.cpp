// BackupAndRestore over a one-checkpoint CheckpointManager.
#include "checkpoint/backup_and_restore.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <vector>

#include "checkpoint/log.h"

namespace est::checkpoint {
namespace {

constexpr const char* kEpochsBlob = "backup_and_restore/epochs";

CheckpointManagerOptions manager_options(const BackupAndRestoreOptions& options) {
  if (options.backup_dir.empty())
    throw InvalidArgumentError("BackupAndRestore: backup_dir is empty; give a directory");
  if (options.save_freq_steps < 0)
    throw InvalidArgumentError(fmt::format(
        "BackupAndRestore: save_freq_steps is {}; use a positive step count, or 0 for epochs",
        options.save_freq_steps));
  return {.directory = options.backup_dir,
          .checkpoint_name = "backup.ckpt",
          .keep_checkpoint_max = 1,
          .is_chief = options.is_chief,
          .task_id = options.task_id,
          .async = options.async,
          .clock = options.clock};
}

}  // namespace

BackupAndRestore::BackupAndRestore(BackupAndRestoreOptions options)
    : options_(std::move(options)), manager_(manager_options(options_)) {}

std::optional<ResumePoint> BackupAndRestore::restore(TensorBundle& state) {
  TensorBundle target = state;  // shares the tensors; blobs are replaced on success only
  std::optional<RestoreResult> restored = manager_.restore(target);
  if (!restored) return std::nullopt;
  ResumePoint resume{*restored, 0};
  std::erase_if(target.blobs, [&](const Blob& blob) {
    if (blob.name != kEpochsBlob) return false;
    const char* end = blob.bytes.data() + blob.bytes.size();
    auto [stop, error] = std::from_chars(blob.bytes.data(), end, resume.completed_epochs);
    if (error != std::errc() || stop != end)
      throw DataLossError(
          fmt::format("Backup {}: blob {} is not a number", restored->path, kEpochsBlob));
    return true;
  });
  state.global_step = target.global_step;
  state.blobs = std::move(target.blobs);
  completed_epochs_ = resume.completed_epochs;
  log_info(fmt::format("Resuming from backup {} (step {}, epoch {})", restored->path,
                       restored->global_step, completed_epochs_));
  return resume;
}

void BackupAndRestore::backup(const TensorBundle& state) {
  TensorBundle with_epochs = state;  // handles only; the manager snapshots
  std::erase_if(with_epochs.blobs, [](const Blob& blob) { return blob.name == kEpochsBlob; });
  with_epochs.add_blob(kEpochsBlob, std::to_string(completed_epochs_));
  manager_.save(with_epochs);
}

void BackupAndRestore::on_step_end(const TensorBundle& state) {
  if (options_.save_freq_steps > 0 && state.global_step % options_.save_freq_steps == 0)
    backup(state);
}

void BackupAndRestore::on_epoch_end(int64_t epoch, const TensorBundle& state) {
  completed_epochs_ = epoch + 1;
  if (options_.save_freq_steps == 0) backup(state);
}

void BackupAndRestore::on_train_end() {
  manager_.wait();  // a worker's own workertemp_<task_id> is written and deleted by now
  if (!options_.delete_checkpoint) return;
  namespace fs = std::filesystem;
  std::error_code error;
  if (options_.is_chief) {
    // Another worker may be writing its workertemp_* right now: that one is its to delete.
    std::vector<fs::path> mine;
    for (const fs::directory_entry& entry : fs::directory_iterator(options_.backup_dir, error))
      if (!entry.path().filename().string().starts_with("workertemp_")) mine.push_back(entry);
    for (const fs::path& path : mine)
      if (fs::remove_all(path, error); error) break;
    if (error && error != std::errc::no_such_file_or_directory) {
      log_warning(fmt::format("Could not delete the backup in {}: {}", options_.backup_dir,
                              error.message()));
      return;
    }
  }
  // The last task out removes the directory; it is not empty while another still writes.
  fs::remove(options_.backup_dir, error);
  if (error && error != std::errc::directory_not_empty &&
      error != std::errc::no_such_file_or_directory)
    log_warning(fmt::format("Could not delete the backup directory {}: {}", options_.backup_dir,
                            error.message()));
}

}  // namespace est::checkpoint
