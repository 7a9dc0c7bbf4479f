// RunConfig: how an Estimator runs (tf.estimator.RunConfig): where it writes, how often it
// saves checkpoints and summaries, how often it logs, the seed, and the distribution strategy.
//
// A plain struct with TensorFlow's field names and defaults, so designated initializers read
// like TF's keyword arguments: `est::RunConfig{.model_dir = "/tmp/m", .save_checkpoints_steps =
// 100}`. Checkpoint cadence follows TF's rule: save_checkpoints_secs defaults to 600 unless
// save_checkpoints_steps is set; setting save_checkpoints_secs to nullopt with no steps turns
// periodic saving off; setting both is an error. Task fields hold the local defaults until
// TF_CONFIG is read by the distribute layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace est {

namespace distribute {
class Strategy;  // distribute/strategy.h: RunConfig only holds a pointer
}  // namespace distribute

// Seconds since the epoch; injected in tests to drive time-based cadences.
using Clock = std::function<double()>;
double system_clock_seconds();

struct RunConfig {
  // Marks save_checkpoints_secs as "TensorFlow's default": 600 s unless steps are set.
  static constexpr double kUseDefault = -1.0;
  static constexpr double kDefaultCheckpointSecs = 600.0;

  std::string model_dir;                   // empty: the Estimator makes a temporary directory
  std::optional<uint64_t> tf_random_seed;  // unset: a random seed per Estimator
  int64_t save_summary_steps = 100;        // 0 disables the SummarySaverHook
  std::optional<int64_t> save_checkpoints_steps;
  std::optional<double> save_checkpoints_secs = kUseDefault;
  int keep_checkpoint_max = 5;                   // 0 keeps every checkpoint
  double keep_checkpoint_every_n_hours = 10000;  // TensorFlow's default
  int64_t log_step_count_steps = 100;            // loss line and global_step/sec
  // Strategies for train() and evaluate() (null: one replica on the caller's thread). Under a
  // strategy input_fn gets its InputContext and yields per-replica batches; see
  // estimator/replicas.h for the loss scaling. predict() is never distributed, as in TF.
  std::shared_ptr<distribute::Strategy> train_distribute;
  std::shared_ptr<distribute::Strategy> eval_distribute;

  // Task fields: local defaults (a single worker that is its own chief).
  std::string task_type = "worker";
  int task_id = 0;
  bool is_chief = true;
  int num_worker_replicas = 1;
  int num_ps_replicas = 0;

  // Where the Estimator's timers read the time (cadence by seconds, throttling, step rates);
  // empty: the system clock. Not a TensorFlow field: tests inject a fake clock here.
  Clock clock;

  // The cadences after TF's defaulting: at most one of the two is set.
  std::optional<int64_t> checkpoint_steps() const;
  std::optional<double> checkpoint_secs() const;
  double now() const { return clock ? clock() : system_clock_seconds(); }

  // InvalidArgumentError naming the field and what to do when a value is out of range or both
  // cadences are set explicitly.
  void validate() const;

  // A validated copy with some fields changed, as RunConfig.replace(**kwargs):
  //   auto eval_config = config.replace([](est::RunConfig& c) { c.save_summary_steps = 10; });
  RunConfig replace(const std::function<void(RunConfig&)>& edit) const;
};

}  // namespace est
