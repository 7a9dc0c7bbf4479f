// Early stopping: eval event files -> per-step metrics -> TF's four predicates.
#include "estimator/hooks/early_stopping.h"

#include <fmt/format.h>

#include <filesystem>

#include "estimator/estimator.h"
#include "estimator/event_reader.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {

std::map<int64_t, std::map<std::string, double>> read_eval_metrics(const std::string& eval_dir) {
  std::map<int64_t, std::map<std::string, double>> metrics;
  if (!std::filesystem::is_directory(eval_dir)) return metrics;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(eval_dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files)
    for (const auto& event : read_events(file))
      if (!event.tag.empty()) metrics[event.step][event.tag] = event.value;
  return metrics;
}

namespace hooks {
namespace {

std::string resolve_eval_dir(const Estimator& estimator, const EarlyStoppingOptions& options) {
  return options.eval_dir.empty() ? estimator.eval_dir() : options.eval_dir;
}

double metric_at(const std::map<std::string, double>& metrics, const std::string& name,
                 int64_t step, const std::string& eval_dir) {
  auto it = metrics.find(name);
  if (it == metrics.end())
    throw NotFoundError(fmt::format(
        "early stopping: metric '{}' is not among the evaluation results of step {} in {}; "
        "name one of the eval_metric_ops (or \"loss\")",
        name, step, eval_dir));
  return it->second;
}

std::shared_ptr<SessionRunHook> make_hook(std::function<bool()> predicate,
                                          const EarlyStoppingOptions& options,
                                          const Estimator& estimator) {
  std::optional<double> secs = options.run_every_steps ? std::nullopt : options.run_every_secs;
  return std::make_shared<StopOnPredicateHook>(std::move(predicate), secs, options.run_every_steps,
                                               estimator.config().clock);
}

// No improvement for `max_steps` global steps: the latest evaluation is that far past the best.
std::shared_ptr<SessionRunHook> no_improvement_hook(const Estimator& estimator,
                                                    const std::string& metric_name,
                                                    int64_t max_steps, bool higher_is_better,
                                                    const EarlyStoppingOptions& options) {
  if (max_steps <= 0)
    throw InvalidArgumentError(fmt::format(
        "early stopping: the number of steps without improvement must be positive, got {}",
        max_steps));
  std::string eval_dir = resolve_eval_dir(estimator, options);
  return make_hook(
      [=] {
        std::optional<double> best;
        int64_t best_step = 0;
        for (const auto& [step, metrics] : read_eval_metrics(eval_dir)) {
          if (step < options.min_steps) continue;
          double value = metric_at(metrics, metric_name, step, eval_dir);
          if (!best || (higher_is_better ? value > *best : value < *best)) {
            best = value;
            best_step = step;
          }
          if (step - best_step >= max_steps) {
            log::info(
                "No {} in metric \"{}\" for {} steps, which is greater than or equal to max "
                "steps ({}) configured for early stopping.",
                higher_is_better ? "increase" : "decrease", metric_name, step - best_step,
                max_steps);
            return true;
          }
        }
        return false;
      },
      options, estimator);
}

std::shared_ptr<SessionRunHook> threshold_hook(const Estimator& estimator,
                                               const std::string& metric_name, double threshold,
                                               bool stop_if_higher,
                                               const EarlyStoppingOptions& options) {
  std::string eval_dir = resolve_eval_dir(estimator, options);
  return make_hook(
      [=] {
        for (const auto& [step, metrics] : read_eval_metrics(eval_dir)) {
          if (step < options.min_steps) continue;
          double value = metric_at(metrics, metric_name, step, eval_dir);
          if (stop_if_higher ? value > threshold : value < threshold) {
            log::info(
                "At step {}, metric \"{}\" has value {} which is {} than the configured "
                "threshold ({}) for early stopping.",
                step, metric_name, value, stop_if_higher ? "higher" : "lower", threshold);
            return true;
          }
        }
        return false;
      },
      options, estimator);
}

}  // namespace

StopOnPredicateHook::StopOnPredicateHook(std::function<bool()> should_stop,
                                         std::optional<double> run_every_secs,
                                         std::optional<int64_t> run_every_steps, Clock clock)
    : should_stop_(std::move(should_stop)),
      timer_(run_every_secs, run_every_steps, std::move(clock)) {
  if (!should_stop_) throw InvalidArgumentError("StopOnPredicateHook: the predicate is empty");
}

void StopOnPredicateHook::begin() { timer_.reset(); }

void StopOnPredicateHook::after_run(SessionRunContext& run_context,
                                    const SessionRunValues& run_values) {
  int64_t step = run_values.global_step;
  if (!timer_.last_triggered_step()) timer_.update_last_triggered_step(step);
  if (!timer_.should_trigger_for_step(step)) return;
  timer_.update_last_triggered_step(step);
  if (should_stop_()) {
    log::info("Requesting early stopping at global step {}", step);
    run_context.request_stop();
  }
}

std::shared_ptr<SessionRunHook> stop_if_no_decrease_hook(const Estimator& estimator,
                                                         const std::string& metric_name,
                                                         int64_t max_steps_without_decrease,
                                                         EarlyStoppingOptions options) {
  return no_improvement_hook(estimator, metric_name, max_steps_without_decrease, false, options);
}

std::shared_ptr<SessionRunHook> stop_if_no_increase_hook(const Estimator& estimator,
                                                         const std::string& metric_name,
                                                         int64_t max_steps_without_increase,
                                                         EarlyStoppingOptions options) {
  return no_improvement_hook(estimator, metric_name, max_steps_without_increase, true, options);
}

std::shared_ptr<SessionRunHook> stop_if_higher_hook(const Estimator& estimator,
                                                    const std::string& metric_name,
                                                    double threshold,
                                                    EarlyStoppingOptions options) {
  return threshold_hook(estimator, metric_name, threshold, true, options);
}

std::shared_ptr<SessionRunHook> stop_if_lower_hook(const Estimator& estimator,
                                                   const std::string& metric_name, double threshold,
                                                   EarlyStoppingOptions options) {
  return threshold_hook(estimator, metric_name, threshold, false, options);
}

}  // namespace hooks
}  // namespace est
