// The evaluator task's loop: the start delay, one evaluation per new checkpoint, throttling,
// the wait for checkpoints (logged, bounded), deleted checkpoints, and the exit at max_steps.
#include "estimator/evaluator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "checkpoint/reader.h"
#include "estimator/exporter.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::detail {
namespace {

void sleep_seconds(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace

TrainAndEvaluateResult evaluate_and_export(Estimator& estimator, const EvalSpec& eval_spec,
                                           const std::string& checkpoint, bool is_final) {
  Metrics metrics = estimator.evaluate(eval_spec.input_fn, {.steps = eval_spec.steps,
                                                            .hooks = eval_spec.hooks,
                                                            .checkpoint_path = checkpoint,
                                                            .name = eval_spec.name});
  std::vector<std::string> exports;
  for (const auto& exporter : eval_spec.exporters) {
    std::string path =
        (std::filesystem::path(estimator.model_dir()) / "export" / exporter->name()).string();
    if (auto written = exporter->export_model(estimator, path, checkpoint, metrics, is_final))
      exports.push_back(*written);
  }
  return {metrics, exports};
}

TrainAndEvaluateResult run_evaluator(Estimator& estimator, const TrainSpec& train_spec,
                                     const EvalSpec& eval_spec, LatestCheckpointFn latest_fn) {
  if (!latest_fn) latest_fn = [&] { return estimator.latest_checkpoint(); };
  const RunConfig& config = estimator.config();
  log::info("Running the evaluator (task_type = {}, task_id = {}) on {}.", config.task_type,
            config.task_id, estimator.model_dir());
  if (eval_spec.start_delay_secs > 0) {
    log::info("Waiting {} secs before starting eval.", eval_spec.start_delay_secs);
    sleep_seconds(eval_spec.start_delay_secs);
  }
  TrainAndEvaluateResult last;
  std::string previous;  // the last checkpoint evaluated
  double waiting_since = config.now();
  double next_wait_log = 0;
  for (;;) {
    double started = config.now();
    std::optional<std::string> latest = latest_fn();
    if (latest && *latest != previous) {
      int64_t step = -1;
      try {
        step = checkpoint::read_info(*latest).global_step;
        bool is_final = train_spec.max_steps && step >= *train_spec.max_steps;
        last = evaluate_and_export(estimator, eval_spec, *latest, is_final);
        previous = *latest;
        waiting_since = config.now();
        if (is_final) {
          log::info("Exiting evaluation, global_step={} >= train max_steps={}", step,
                    *train_spec.max_steps);
          return last;
        }
      } catch (const NotFoundError& error) {
        // Retention removed it between the state file and the read: take the newest instead.
        log::warning(
            "Checkpoint {} was deleted before it could be evaluated (training keeps only the "
            "newest keep_checkpoint_max checkpoints); moving on to the newest one ({})",
            *latest, error.what());
        continue;
      } catch (const DataLossError& error) {
        if (std::filesystem::exists(*latest)) throw;
        log::warning(
            "Checkpoint {} was deleted while it was being evaluated; moving on to the "
            "newest one ({})",
            *latest, error.what());
        continue;
      }
    } else {
      double waited = config.now() - waiting_since;
      if (waited > eval_spec.checkpoint_timeout_secs)
        throw DeadlineExceededError(fmt::format(
            "evaluator: no new checkpoint in {} for {:.0f} s (EvalSpec.checkpoint_timeout_secs); "
            "is the training job still running?",
            estimator.model_dir(), waited));
      if (config.now() >= next_wait_log) {
        if (!latest)
          log::info(
              "Estimator is not trained yet. Will start an evaluation when a checkpoint is "
              "ready in {} ({:.0f} s so far).",
              estimator.model_dir(), waited);
        else
          log::info(
              "No new checkpoint ready for evaluation (the last one evaluated is {}); "
              "waiting for the next one ({:.0f} s so far).",
              previous, waited);
        next_wait_log = config.now() + 60;
      }
    }
    // TensorFlow's throttle: at most one evaluation every throttle_secs; poll at least every
    // few seconds while waiting for a checkpoint.
    double elapsed = config.now() - started;
    double pause = std::max(eval_spec.throttle_secs - elapsed, 0.0);
    if (!latest || *latest == previous) pause = std::clamp(pause, 0.2, 5.0);
    if (pause > 0) log::debug("Waiting {:.2f} secs before starting next eval run.", pause);
    sleep_seconds(pause);
  }
}

}  // namespace est::detail
