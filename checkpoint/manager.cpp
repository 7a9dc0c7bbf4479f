// CheckpointManager: snapshot, background write, state file, retention sweep.
#include "checkpoint/manager.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "checkpoint/file_util.h"
#include "checkpoint/log.h"
#include "checkpoint/tf_bundle_writer.h"
#include "checkpoint/writer.h"

namespace est::checkpoint {
namespace {

// "model.ckpt-200" for "model.ckpt-200.h5" or "model.ckpt-200": a checkpoint whichever name of
// it the state file records.
std::string without_h5(const std::string& name) {
  return name.ends_with(".h5") ? name.substr(0, name.size() - 3) : name;
}

}  // namespace

double system_clock_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : options_(std::move(options)) {
  if (options_.directory.empty())
    throw InvalidArgumentError("CheckpointManager: directory is empty; set the model directory");
  if (options_.checkpoint_name.empty() || options_.checkpoint_name.find('/') != std::string::npos)
    throw InvalidArgumentError(fmt::format(
        "CheckpointManager: checkpoint_name \"{}\" must be a plain file name prefix like "
        "\"model.ckpt\"",
        options_.checkpoint_name));
  if (options_.keep_checkpoint_max < 0 || options_.keep_checkpoint_every_n_hours < 0)
    throw InvalidArgumentError(fmt::format(
        "CheckpointManager: keep_checkpoint_max ({}) and keep_checkpoint_every_n_hours ({}) "
        "must not be negative",
        options_.keep_checkpoint_max, options_.keep_checkpoint_every_n_hours));
  if (options_.is_chief) {
    write_directory_ = options_.directory;
    ensure_directory(write_directory_);
    int removed = remove_stale_temporaries(write_directory_, options_.checkpoint_name) +
                  remove_stale_temporaries(write_directory_, kStateFileName);
    if (removed > 0)
      log_info(fmt::format("Removed {} temporary file(s) of interrupted saves from {}", removed,
                           write_directory_));
    recover_state();
  } else {
    write_directory_ =
        (std::filesystem::path(options_.directory) / fmt::format("workertemp_{}", options_.task_id))
            .string();
  }
  if (options_.async) writer_ = std::make_unique<AsyncWriter>(1);
}

CheckpointManager::~CheckpointManager() { writer_.reset(); }

double CheckpointManager::now() const {
  return options_.clock ? options_.clock() : system_clock_seconds();
}

void CheckpointManager::recover_state() {
  const double current = now();
  std::optional<CheckpointState> state = read_checkpoint_state(write_directory_);
  if (!state) {
    last_preserved_ = current;
    return;
  }
  const auto& paths = state->all_model_checkpoint_paths;
  const auto& timestamps = state->all_model_checkpoint_timestamps;
  for (size_t i = 0; i < paths.size(); ++i)
    kept_.push_back({paths[i], timestamps.size() == paths.size() ? timestamps[i] : current});
  last_preserved_ = state->last_preserved_timestamp;
  if (current < last_preserved_) {
    log_warning(fmt::format(
        "The clock ({:.0f}) is behind the last preserved checkpoint time ({:.0f}) of {}; "
        "keep_checkpoint_every_n_hours counts from now",
        current, last_preserved_, write_directory_));
    last_preserved_ = current;
  }
}

std::string CheckpointManager::save(const TensorBundle& bundle) {
  validate_bundle(bundle, fmt::format("Saving a checkpoint into {}", write_directory_));
  const std::string file_name = checkpoint_file_name(options_.checkpoint_name, bundle.global_step);
  const double timestamp = now();
  if (!writer_) {
    write(bundle, file_name, timestamp);
  } else {
    writer_->wait_for_room();
    auto snapshot = std::make_shared<TensorBundle>(bundle.snapshot());
    writer_->submit(
        [this, snapshot, file_name, timestamp] { write(*snapshot, file_name, timestamp); });
  }
  return (std::filesystem::path(write_directory_) / file_name).string();
}

void CheckpointManager::wait() {
  if (writer_) writer_->wait();
}

void CheckpointManager::write(const TensorBundle& bundle, const std::string& file_name,
                              double timestamp) {
  if (options_.is_chief)
    write_as_chief(bundle, file_name, timestamp);
  else
    write_as_worker(bundle, file_name, timestamp);
}

void CheckpointManager::write_as_chief(const TensorBundle& bundle, const std::string& file_name,
                                       double timestamp) {
  const std::filesystem::path directory(write_directory_);
  checkpoint::save((directory / file_name).string(), bundle, {.timestamp = timestamp});
  std::string stored_name = file_name;
  if (options_.tf_checkpoint_format) {
    stored_name = without_h5(file_name);
    write_tf_checkpoint((directory / stored_name).string(), bundle);
  }

  CheckpointState state;
  std::vector<std::string> to_delete;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(kept_, [&](const Kept& kept) {
      return without_h5(kept.file_name) == without_h5(stored_name);
    });
    kept_.push_back({stored_name, timestamp});
    if (options_.keep_checkpoint_max > 0) {
      while (kept_.size() > static_cast<size_t>(options_.keep_checkpoint_max)) {
        Kept oldest = kept_.front();
        kept_.erase(kept_.begin());
        const double every = options_.keep_checkpoint_every_n_hours * 3600.0;
        if (every > 0 && oldest.timestamp - every >= last_preserved_) {
          last_preserved_ = oldest.timestamp;  // preserved: stays on disk, leaves the list
          continue;
        }
        to_delete.push_back(oldest.file_name);
      }
    }
    state.model_checkpoint_path = stored_name;
    for (const Kept& kept : kept_) {
      state.all_model_checkpoint_paths.push_back(kept.file_name);
      state.all_model_checkpoint_timestamps.push_back(kept.timestamp);
    }
    state.last_preserved_timestamp = last_preserved_;
  }
  // The state file never names a deleted checkpoint: it is replaced before the sweep.
  write_checkpoint_state(write_directory_, state);
  for (const std::string& name : to_delete) delete_checkpoint(name);
}

// The est file and the TensorFlow bundle of a checkpoint leaving retention, whichever exist:
// the bundle est wrote (tf_checkpoint_format), or the one of a TF job it continued (its step's
// entry replaced by est's own save of that step, tf_resume.h), as TF's Saver deletes it.
void CheckpointManager::delete_checkpoint(const std::string& stored_name) const {
  std::vector<std::string> files{est_checkpoint_path(write_directory_, stored_name)};
  for (std::string& file :
       tf_checkpoint_files(resolve_in_directory(write_directory_, without_h5(stored_name))))
    files.push_back(std::move(file));
  for (const std::string& file : files) {
    std::error_code error;
    std::filesystem::remove(file, error);
    if (error)
      log_warning(fmt::format("Could not delete old checkpoint {}: {}", file, error.message()));
  }
}

void CheckpointManager::write_as_worker(const TensorBundle& bundle, const std::string& file_name,
                                        double timestamp) {
  const std::filesystem::path directory(write_directory_);
  checkpoint::save((directory / file_name).string(), bundle, {.timestamp = timestamp});
  std::error_code error;
  std::filesystem::remove_all(directory, error);
  if (error)
    log_warning(fmt::format("Could not delete the worker's temporary checkpoint directory {}: {}",
                            write_directory_, error.message()));
}

std::optional<RestoreResult> CheckpointManager::restore(TensorBundle& into,
                                                        const RestoreOptions& options) {
  wait();
  if (checkpoint_candidates(options_.directory).empty()) return std::nullopt;
  return restore_into(options_.directory, into, options);
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  return checkpoint::latest_checkpoint(options_.directory);
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> paths;
  for (const Kept& kept : kept_)
    paths.push_back(est_checkpoint_path(write_directory_, kept.file_name));
  return paths;
}

double CheckpointManager::last_preserved_timestamp() const {
  std::lock_guard lock(mutex_);
  return last_preserved_;
}

}  // namespace est::checkpoint
