// RunConfig: how an Estimator runs (tf.estimator.RunConfig): where it writes, how often it
// saves checkpoints and summaries, how often it logs, the seed, and the distribution strategy.
//
// A plain struct with TensorFlow's field names and defaults, so designated initializers read
// like TF's keyword arguments: `est::RunConfig{.model_dir = "/tmp/m", .save_checkpoints_steps =
// 100}`. Checkpoint cadence follows TF's rule: save_checkpoints_secs defaults to 600 unless
// save_checkpoints_steps is set; setting save_checkpoints_secs to nullopt with no steps turns
// periodic saving off; setting both is an error. Task fields hold the local defaults until
// with_tf_config() reads TF_CONFIG (the Estimator calls it); task_type is the TaskType enum, not
// TF's string, so code dispatches on it (fmt prints TF's name).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "distribute/cluster/cluster_spec.h"
#include "distribute/cluster/tf_config.h"

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
  // Not a TensorFlow field (TF writes only its own format): also write every checkpoint the
  // Estimator saves in TensorFlow's V2 format, model.ckpt-<step>.index and
  // .data-00000-of-00001 beside est's model.ckpt-<step>.h5 in model_dir, with TF1's names
  // (dnn/hiddenlayer_0/kernel, its optimizer slots, global_step as int64), deleted with it by
  // keep_checkpoint_max. The `checkpoint` state file then names the TensorFlow prefix, so a
  // TensorFlow program's tf.train.latest_checkpoint(model_dir) + load_checkpoint, or its
  // WarmStartSettings, read the job's latest checkpoint; est still restores from the .h5
  // (with its input position and RNG state). Written in the same background save.
  bool tf_checkpoint_format = false;
  int64_t log_step_count_steps = 100;  // loss line and global_step/sec
  // Not a TensorFlow field: false leaves out train()'s NanTensorHook (a NaN or infinite loss
  // then trains on). keras fit sets it, as Keras has no such check (TerminateOnNaN is opt-in).
  bool check_nan_loss = true;
  // How long a training task waits, when training starts, for the other tasks its strategy
  // needs (the ps tasks of the ParameterServerStrategy the Estimator makes when TF_CONFIG lists
  // ps tasks and train_distribute is unset) before failing with an error naming the missing one.
  double session_creation_timeout_secs = 7200;  // TensorFlow's default
  // Strategies for train() and evaluate() (null: one replica on the caller's thread). Under a
  // strategy input_fn gets its InputContext and yields per-replica batches; see
  // estimator/replicas.h for the loss scaling. predict() is never distributed, as in TF.
  std::shared_ptr<distribute::Strategy> train_distribute;
  std::shared_ptr<distribute::Strategy> eval_distribute;
  // Where the model runs without a strategy (est's, not a TF field: TF places it by default on
  // the first GPU): "" picks the EST_DEVICE environment variable when set, else
  // distribute::local_devices()[0], i.e. "/gpu:0" when a GPU is visible, else "/cpu:0".
  // CUDA_VISIBLE_DEVICES="" hides the GPUs from cudart, so it means the CPU as well.
  std::string device;

  // Task fields (tf.estimator.RunConfig's properties): local defaults, a single worker that is
  // its own chief. with_tf_config() fills them from TF_CONFIG as TensorFlow's RunConfig
  // constructor does (rules in distribute/cluster/tf_config.h); the Estimator calls it when it is
  // constructed, so a program run with TF_CONFIG set needs no extra line.
  distribute::ClusterSpec cluster_spec;  // empty: local, and for the evaluator
  distribute::TaskType task_type = distribute::TaskType::kWorker;
  int task_id = 0;
  bool is_chief = true;
  int num_worker_replicas = 1;  // chief (or master) + workers; 0 for the evaluator
  int num_ps_replicas = 0;
  std::optional<int> global_id_in_cluster = 0;  // unset for the evaluator (TF: None)
  std::string master;                           // "" locally, else "grpc://host:port"
  std::string evaluation_master;
  // Not a TensorFlow field: tasks of the TF_CONFIG cluster on this host, this one included.
  int num_local_tasks = 1;
  // Whether the Estimator still reads TF_CONFIG into the task fields. with_tf_config() clears
  // it; clear it yourself to keep task fields written by hand in a process with TF_CONFIG set.
  bool read_tf_config = true;

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

  // A copy with the task fields (and model_dir, when TF_CONFIG has "model_dir") filled from
  // TF_CONFIG, as tf.estimator.RunConfig() does, and read_tf_config cleared:
  //   auto config = est::RunConfig{.model_dir = "/tmp/m"}.with_tf_config();
  // The rule follows TF: with train_distribute or eval_distribute set, the distribute
  // coordinator's (worker 0 leads a cluster without a chief), otherwise the Estimator's (the
  // cluster needs a chief). InvalidArgumentError for a malformed TF_CONFIG, or when TF_CONFIG's
  // model_dir differs from a model_dir set here. The first form reads the environment and, when
  // TF_CONFIG is unset, changes nothing but read_tf_config; the others read the given value.
  RunConfig with_tf_config() const;
  RunConfig with_tf_config(std::string_view tf_config_json) const;
  RunConfig with_tf_config(const distribute::TfConfig& tf_config) const;

  // A validated copy with some fields changed, as RunConfig.replace(**kwargs):
  //   auto eval_config = config.replace([](est::RunConfig& c) { c.save_summary_steps = 10; });
  RunConfig replace(const std::function<void(RunConfig&)>& edit) const;
};

}  // namespace est
