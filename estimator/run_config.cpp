// RunConfig: TF's cadence defaulting, the range checks of its fields, and TF_CONFIG into the
// task fields (the rules themselves live in distribute/cluster/tf_config.cpp).
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
  if (!(session_creation_timeout_secs > 0))
    fail(fmt::format("session_creation_timeout_secs must be positive, got {}",
                     session_creation_timeout_secs));
  if (task_id < 0) fail(fmt::format("task_id must be >= 0, got {}", task_id));
  bool evaluator = task_type == distribute::TaskType::kEvaluator;
  if (num_worker_replicas < (evaluator ? 0 : 1))
    fail(fmt::format("num_worker_replicas must be >= 1 (0 for the evaluator), got {}",
                     num_worker_replicas));
  if (num_local_tasks < 1)
    fail(fmt::format("num_local_tasks must be >= 1, got {}", num_local_tasks));
  if (num_ps_replicas < 0)
    fail(fmt::format("num_ps_replicas must be >= 0, got {}", num_ps_replicas));
}

RunConfig RunConfig::with_tf_config() const {
  std::optional<std::string> value = distribute::tf_config_from_environment();
  if (!value) {
    RunConfig copy = *this;
    copy.read_tf_config = false;
    return copy;
  }
  return with_tf_config(*value);
}

RunConfig RunConfig::with_tf_config(std::string_view tf_config_json) const {
  return with_tf_config(distribute::parse_tf_config(tf_config_json));
}

RunConfig RunConfig::with_tf_config(const distribute::TfConfig& tf_config) const {
  RunConfig copy = *this;
  if (tf_config.model_dir) {  // run_config.py's _get_model_dir
    if (!model_dir.empty() && model_dir != *tf_config.model_dir)
      throw InvalidArgumentError(fmt::format(
          "RunConfig: model_dir is \"{}\" but TF_CONFIG's \"model_dir\" is \"{}\"; set it in "
          "one place",
          model_dir, *tf_config.model_dir));
    copy.model_dir = *tf_config.model_dir;
  }
  bool strategy = train_distribute != nullptr || eval_distribute != nullptr;
  distribute::TaskFields fields =
      distribute::resolve_task_fields(tf_config, strategy ? distribute::ChiefRule::kMultiWorker
                                                          : distribute::ChiefRule::kEstimator);
  copy.cluster_spec = fields.cluster_spec;
  copy.task_type = fields.task_type;
  copy.task_id = fields.task_id;
  copy.is_chief = fields.is_chief;
  copy.num_worker_replicas = fields.num_worker_replicas;
  copy.num_ps_replicas = fields.num_ps_replicas;
  copy.global_id_in_cluster = fields.global_id_in_cluster;
  copy.master = fields.master;
  copy.evaluation_master = fields.evaluation_master;
  copy.num_local_tasks = fields.num_local_tasks;
  copy.read_tf_config = false;
  return copy;
}

RunConfig RunConfig::replace(const std::function<void(RunConfig&)>& edit) const {
  RunConfig copy = *this;
  if (edit) edit(copy);
  copy.validate();
  return copy;
}

}  // namespace est
