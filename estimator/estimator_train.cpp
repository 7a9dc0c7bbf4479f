// Estimator::train: the checks, the default hooks, then the loop over a TrainingSession
// (estimator/training_session.h), which owns restore, the step and the hooks. Stopping,
// logging, NaN checks, summaries and checkpoints are the default hooks below; the loop itself
// has no such branches.
#include <fmt/format.h>

#include <memory>

#include "checkpoint/model_dir.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_resume.h"
#include "distribute/strategy.h"
#include "estimator/estimator.h"
#include "estimator/hooks/basic_hooks.h"
#include "estimator/loop_util.h"
#include "estimator/summary_cache.h"
#include "estimator/training_session.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

void check_steps(std::optional<int64_t> steps, std::optional<int64_t> max_steps) {
  if (steps && max_steps)
    throw InvalidArgumentError(fmt::format(
        "train: both steps ({}) and max_steps ({}) are set; steps counts from the current global "
        "step, max_steps is absolute: pass one",
        *steps, *max_steps));
  if (steps && *steps <= 0)
    throw InvalidArgumentError(fmt::format("train: steps must be positive, got {}", *steps));
  if (max_steps && *max_steps <= 0)
    throw InvalidArgumentError(
        fmt::format("train: max_steps must be positive, got {}", *max_steps));
}

// The global step of the latest checkpoint, or nullopt when there is none or it cannot be
// read (restore will then fall back to an older one and say so).
std::optional<int64_t> saved_global_step(const std::string& model_dir) {
  auto latest = checkpoint::latest_checkpoint(model_dir);
  if (!latest) return std::nullopt;
  try {
    if (checkpoint::is_tf_prefix(*latest)) return checkpoint::tf_checkpoint_global_step(*latest);
    return checkpoint::read_info(*latest).global_step;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Event files get what was written even when the loop ends with an exception.
struct FlushSummariesOnExit {
  ~FlushSummariesOnExit() {
    try {
      flush_summary_writers();
    } catch (const std::exception& error) {
      log::error("Flushing summaries failed: {}", error.what());
    }
  }
};

// The loop's rules, as TensorFlow's Estimator installs them, then the caller's hooks.
Hooks training_hooks(const RunConfig& config, const Hooks& hooks, std::optional<int64_t> steps,
                     std::optional<int64_t> max_steps) {
  Hooks all;
  if (steps || max_steps) all.push_back(std::make_shared<hooks::StopAtStepHook>(steps, max_steps));
  if (config.check_nan_loss) all.push_back(std::make_shared<hooks::NanTensorHook>("loss"));
  all.push_back(std::make_shared<hooks::LoggingTensorHook>(
      hooks::LoggingTensorHook::Entries{{"loss", "loss"}, {"step", "global_step"}},
      config.log_step_count_steps, std::nullopt, false, config.clock));
  all.insert(all.end(), hooks.begin(), hooks.end());
  return all;
}

// The chief's step counter and summaries, and the checkpoint saver. The other workers of a
// multi-worker job write their checkpoints to model_dir's workertemp_<task_id> and delete it,
// as TensorFlow's do; only the chief's count.
Hooks chief_only_hooks(const RunConfig& config, const Listeners& saving_listeners) {
  Hooks chief;
  if (config.is_chief) {
    chief.push_back(std::make_shared<hooks::StepCounterHook>(
        config.log_step_count_steps, std::nullopt, config.model_dir, config.clock));
    if (config.save_summary_steps > 0)
      chief.push_back(std::make_shared<hooks::SummarySaverHook>(
          config.save_summary_steps, std::nullopt, config.model_dir,
          std::vector<std::string>{"loss"}, config.clock));
  }
  bool multi_worker = config.train_distribute && config.train_distribute->num_workers() > 1;
  if (config.is_chief || multi_worker)
    chief.push_back(std::make_shared<hooks::CheckpointSaverHook>(hooks::CheckpointSaverOptions{
        .checkpoint_dir = config.model_dir,
        .save_secs = config.checkpoint_secs(),
        .save_steps = config.checkpoint_steps(),
        .keep_checkpoint_max = config.keep_checkpoint_max,
        .keep_checkpoint_every_n_hours = config.keep_checkpoint_every_n_hours,
        .is_chief = config.is_chief,
        .task_id = config.task_id,
        .listeners = config.is_chief ? saving_listeners : Listeners{},
        .clock = config.clock,
        .tf_checkpoint_format = config.tf_checkpoint_format}));
  return chief;
}

}  // namespace

Estimator& Estimator::train(const InputFn& input_fn, const TrainOptions& options) {
  try {
    return train_loop(input_fn, options);
  } catch (const std::exception& error) {
    // The other workers stop at once with this error instead of waiting for this one.
    if (config_.train_distribute) config_.train_distribute->report_error(error);
    throw;
  }
}

Estimator& Estimator::train_loop(const InputFn& input_fn, const TrainOptions& options) {
  const auto& [hooks, steps, max_steps, saving_listeners] = options;
  check_steps(steps, max_steps);
  if (const auto& strategy = config_.train_distribute;
      strategy && strategy->num_workers() > 1 && strategy->is_chief() != config_.is_chief)
    throw InvalidArgumentError(fmt::format(
        "train: RunConfig says this task ({} {}) is {}the chief, but its {} says it is {}; build "
        "both from the same TF_CONFIG (RunConfig reads it when the Estimator is constructed)",
        config_.task_type, config_.task_id, config_.is_chief ? "" : "not ", strategy->name(),
        strategy->is_chief() ? "the chief" : "not the chief"));
  detail::check_hooks(hooks, "train");
  // One trainer per model_dir: the chief holds the lock until train() returns or throws, so a
  // second process started on the same directory fails here, naming the first.
  std::optional<checkpoint::ModelDirLock> model_dir_lock;
  if (config_.is_chief) model_dir_lock.emplace(model_dir());
  if (max_steps && saved_global_step(model_dir()).value_or(0) >= *max_steps) {
    log::info("Skipping training since max_steps has already saved.");
    return *this;
  }
  if (!saving_listeners.empty() && !config_.is_chief)
    log::warning("train: saving_listeners run only on the chief; ignored on {} {}",
                 config_.task_type, config_.task_id);

  FlushSummariesOnExit flush_summaries;
  detail::TrainingSession session(
      {.model = {model_fn_, input_fn, &config_, seed_, &params_},
       .warm_start_from = warm_start_from_,
       .steps = steps,
       .max_steps = max_steps,
       .hooks = training_hooks(config_, hooks, steps, max_steps),
       .chief_only_hooks = chief_only_hooks(config_, saving_listeners)});
  while (!session.should_stop()) session.run(session.next_batch());
  session.close();
  log::info("Loss for final step: {}.", static_cast<float>(session.final_loss()));
  return *this;
}

}  // namespace est
