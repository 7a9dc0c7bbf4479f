// RunConfig: TF's cadence defaulting and the range checks of its fields.
#include "estimator/run_config.h"

#include <fmt/format.h>

#include <chrono>

#include "ops/error.h"

namespace est {

double system_clock_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<int64_t> RunConfig::checkpoint_steps() const { return save_checkpoints_steps; }

std::optional<double> RunConfig::checkpoint_secs() const {
  if (save_checkpoints_secs && *save_checkpoints_secs == kUseDefault)
    return save_checkpoints_steps ? std::nullopt : std::optional<double>(kDefaultCheckpointSecs);
  return save_checkpoints_secs;
}

void RunConfig::validate() const {
  auto fail = [](const std::string& message) {
    throw InvalidArgumentError("RunConfig: " + message);
  };
  bool secs_explicit = save_checkpoints_secs && *save_checkpoints_secs != kUseDefault;
  if (save_checkpoints_steps && secs_explicit)
    fail(fmt::format(
        "save_checkpoints_steps ({}) and save_checkpoints_secs ({}) are both set; set only one "
        "(or set save_checkpoints_secs = std::nullopt to save by steps)",
        *save_checkpoints_steps, *save_checkpoints_secs));
  if (save_checkpoints_steps && *save_checkpoints_steps <= 0)
    fail(fmt::format("save_checkpoints_steps must be positive, got {}", *save_checkpoints_steps));
  if (secs_explicit && *save_checkpoints_secs <= 0)
    fail(fmt::format("save_checkpoints_secs must be positive, got {} (std::nullopt disables it)",
                     *save_checkpoints_secs));
  if (save_summary_steps < 0)
    fail(fmt::format("save_summary_steps must be >= 0 (0 disables), got {}", save_summary_steps));
  if (log_step_count_steps <= 0)
    fail(fmt::format("log_step_count_steps must be positive, got {}", log_step_count_steps));
  if (keep_checkpoint_max < 0)
    fail(
        fmt::format("keep_checkpoint_max must be >= 0 (0 keeps all), got {}", keep_checkpoint_max));
  if (keep_checkpoint_every_n_hours < 0)
    fail(fmt::format("keep_checkpoint_every_n_hours must be >= 0, got {}",
                     keep_checkpoint_every_n_hours));
  if (task_id < 0) fail(fmt::format("task_id must be >= 0, got {}", task_id));
  if (num_worker_replicas < 1)
    fail(fmt::format("num_worker_replicas must be >= 1, got {}", num_worker_replicas));
  if (num_ps_replicas < 0)
    fail(fmt::format("num_ps_replicas must be >= 0, got {}", num_ps_replicas));
}

RunConfig RunConfig::replace(const std::function<void(RunConfig&)>& edit) const {
  RunConfig copy = *this;
  if (edit) edit(copy);
  copy.validate();
  return copy;
}

}  // namespace est
