// Early stopping (tf.estimator.experimental.stop_if_*): hooks that stop training when the
// metrics of past evaluations, read back from the eval directory's event files, say so.
//
// The check runs every `run_every_secs` seconds (or `run_every_steps` steps) of training; each
// check reads every evaluation so far ({global step: {metric: value}}) and applies the
// predicate. Evaluations come from train_and_evaluate or from evaluate() calls in between.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "estimator/hooks/session_run_hook.h"
#include "estimator/hooks/timer.h"

namespace est {

class Estimator;

// Every scalar of the event files in `eval_dir`: step -> tag -> value (later files win).
std::map<int64_t, std::map<std::string, double>> read_eval_metrics(const std::string& eval_dir);

namespace hooks {

// Requests a stop when `should_stop()` returns true, checked on a timer.
class StopOnPredicateHook : public SessionRunHook {
 public:
  StopOnPredicateHook(std::function<bool()> should_stop, std::optional<double> run_every_secs,
                      std::optional<int64_t> run_every_steps, Clock clock = {});
  void begin() override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

 private:
  std::function<bool()> should_stop_;
  SecondOrStepTimer timer_;
};

struct EarlyStoppingOptions {
  std::string eval_dir;   // empty: the estimator's eval_dir()
  int64_t min_steps = 0;  // evaluations before this global step are ignored
  std::optional<double> run_every_secs = 60;
  std::optional<int64_t>
      run_every_steps;  // set it (and run_every_secs = nullopt) to check by steps
};

// Stop when `metric_name` has not decreased (increased) for max_steps_without_decrease
// (increase) global steps.
std::shared_ptr<SessionRunHook> stop_if_no_decrease_hook(const Estimator& estimator,
                                                         const std::string& metric_name,
                                                         int64_t max_steps_without_decrease,
                                                         EarlyStoppingOptions options = {});
std::shared_ptr<SessionRunHook> stop_if_no_increase_hook(const Estimator& estimator,
                                                         const std::string& metric_name,
                                                         int64_t max_steps_without_increase,
                                                         EarlyStoppingOptions options = {});
// Stop when an evaluation's `metric_name` is above (below) `threshold`.
std::shared_ptr<SessionRunHook> stop_if_higher_hook(const Estimator& estimator,
                                                    const std::string& metric_name,
                                                    double threshold,
                                                    EarlyStoppingOptions options = {});
std::shared_ptr<SessionRunHook> stop_if_lower_hook(const Estimator& estimator,
                                                   const std::string& metric_name, double threshold,
                                                   EarlyStoppingOptions options = {});

}  // namespace hooks
}  // namespace est
