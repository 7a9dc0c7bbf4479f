// ModelCheckpoint (Keras 2.x keras/callbacks.py ModelCheckpoint._save_model, _get_file_path,
// _maybe_remove_file, _should_save_on_batch; keras/distribute/distributed_file_utils.py
// write_filepath and remove_temp_dir_with_filepath; see model_checkpoint.h).
#include "keras/model_checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <limits>

#include "distribute/strategy.h"
#include "keras/model.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

namespace fs = std::filesystem;

// distributed_file_utils.write_dirpath: the directory a worker that is not the chief writes
// into instead of `dir` in a multi-worker job (<dir>/workertemp_<task_id>), or nullopt where this
// task writes `dir` itself (no strategy, a single worker, or the chief). The task comes from
// the model's RunConfig read as the Estimator reads it.
std::optional<fs::path> worker_temp_dir(Model& model, const fs::path& dir) {
  const distribute::Strategy* strategy = model.config().train_distribute.get();
  if (strategy == nullptr || !strategy->trains_with_other_tasks()) return std::nullopt;
  RunConfig config =
      model.config().read_tf_config ? model.config().with_tf_config() : model.config();
  if (config.is_chief) return std::nullopt;
  std::string base = fmt::format("workertemp_{}", config.task_id);
  return dir.filename() == base ? dir : dir / base;  // _is_temp_dir: already the temporary one
}

}  // namespace

std::string format_filepath(const std::string& pattern, const std::map<std::string, int64_t>& ints,
                            const Logs& logs) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out += c;  // "{{" and "}}"
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = pattern.find('}', i);
    if (close == std::string::npos)
      throw InvalidArgumentError(
          fmt::format("ModelCheckpoint filepath {}: a '{{' without its '}}'", pattern));
    std::string field = pattern.substr(i + 1, close - i - 1);
    size_t colon = field.find(':');
    std::string name = field.substr(0, colon);
    std::string spec = colon == std::string::npos ? "" : field.substr(colon);
    try {
      if (auto it = ints.find(name); it != ints.end()) {
        out += fmt::format(fmt::runtime("{" + spec + "}"), it->second);
      } else if (auto log = logs.find(name); log != logs.end()) {
        out += fmt::format(fmt::runtime("{" + spec + "}"), log->second);
      } else {
        std::string keys = "epoch";
        for (const auto& [key, value] : ints)
          if (key != "epoch") keys += ", " + key;
        for (const auto& [key, value] : logs) keys += ", " + key;
        throw InvalidArgumentError(fmt::format(
            "Failed to format this callback filepath: \"{}\". Reason: no value named '{}' (there "
            "are: {})",
            pattern, name, keys));
      }
    } catch (const fmt::format_error& error) {
      throw InvalidArgumentError(
          fmt::format("Failed to format this callback filepath: \"{}\". Reason: field '{}': {}",
                      pattern, field, error.what()));
    }
    i = close;
  }
  return out;
}

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
  if (options_.filepath.empty()) throw InvalidArgumentError("ModelCheckpoint: filepath is empty");
  const std::string& path = options_.filepath;
  if (options_.save_weights_only && !path.ends_with(".weights.h5"))
    throw InvalidArgumentError(fmt::format(
        "When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must "
        "end in `.weights.h5` (Keras weights format). Received: filepath={}",
        path));
  if (!options_.save_weights_only && !path.ends_with(".keras") && !path.ends_with(".h5"))
    throw InvalidArgumentError(fmt::format(
        "The filepath provided must end in `.keras` (Keras model format) or `.h5`. Received: "
        "filepath={}",
        path));
  const std::string& mode = options_.mode;
  if (mode != "auto" && mode != "min" && mode != "max")
    throw InvalidArgumentError(
        fmt::format("ModelCheckpoint mode {} is unknown; use \"auto\", \"min\" or \"max\"", mode));
  const std::string& monitor = options_.monitor;
  maximize_ = mode == "max" || (mode == "auto" && (monitor.find("acc") != std::string::npos ||
                                                   monitor.starts_with("fmeasure")));
  best_ = options_.initial_value_threshold.value_or(maximize_
                                                        ? -std::numeric_limits<double>::infinity()
                                                        : std::numeric_limits<double>::infinity());
  if (const auto* freq = std::get_if<std::string>(&options_.save_freq)) {
    if (*freq != "epoch")
      throw InvalidArgumentError(fmt::format(
          "Unrecognized save_freq: {}; expected 'epoch' or an integer number of batches", *freq));
  } else {
    every_batches_ = std::get<int64_t>(options_.save_freq);
    if (every_batches_ < 1)
      throw InvalidArgumentError(
          fmt::format("ModelCheckpoint save_freq must be >= 1 batch, got {}", every_batches_));
  }
}

void ModelCheckpoint::on_epoch_begin(int epoch, const Logs&) { current_epoch_ = epoch; }

void ModelCheckpoint::on_train_batch_end(int64_t batch, const Logs& logs) {
  if (every_batches_ == 0) return;
  // _should_save_on_batch: the batch index restarts each epoch.
  batches_since_save_ += batch <= last_batch_seen_ ? batch + 1 : batch - last_batch_seen_;
  last_batch_seen_ = batch;
  if (batches_since_save_ >= every_batches_) {
    batches_since_save_ = 0;
    save(current_epoch_, batch, logs);
  }
}

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  if (every_batches_ == 0) save(epoch, std::nullopt, logs);
}

void ModelCheckpoint::save(int epoch, std::optional<int64_t> batch, const Logs& logs) {
  std::map<std::string, int64_t> ints{{"epoch", epoch + 1}};
  if (batch) ints["batch"] = *batch + 1;
  // _get_file_path: every worker saves (as Keras's, where reading the variables is a collective),
  // the chief to the formatted path and the others to a temporary directory beside it, removed
  // after the save (_maybe_remove_file), so that only the chief's file stays.
  fs::path formatted = format_filepath(options_.filepath, ints, logs);
  std::optional<fs::path> temp_dir = worker_temp_dir(*model(), formatted.parent_path());
  std::string path = temp_dir ? (*temp_dir / formatted.filename()).string() : formatted.string();
  if (should_write(epoch, logs, path)) {
    if (options_.save_weights_only)
      model()->save_weights(path);
    else
      model()->save(path);
  }
  if (temp_dir) fs::remove_all(*temp_dir);
}

bool ModelCheckpoint::should_write(int epoch, const Logs& logs, const std::string& path) {
  if (!options_.save_best_only) {
    if (options_.verbose > 0) fmt::print("\nEpoch {}: saving model to {}\n", epoch + 1, path);
    return true;
  }
  auto found = logs.find(options_.monitor);
  if (found == logs.end()) {
    log::warning("Can save best model only with {} available, skipping.", options_.monitor);
    return false;
  }
  double current = found->second;
  bool improved = maximize_ ? current > best_ : current < best_;
  if (!improved) {
    if (options_.verbose > 0)
      fmt::print("\nEpoch {}: {} did not improve from {:.5f}\n", epoch + 1, options_.monitor,
                 best_);
    return false;
  }
  if (options_.verbose > 0)
    fmt::print("\nEpoch {}: {} improved from {:.5f} to {:.5f}, saving model to {}\n", epoch + 1,
               options_.monitor, best_, current, path);
  best_ = current;
  return true;
}

}  // namespace est::keras
