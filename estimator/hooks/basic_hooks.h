// The small hooks of tf.train: StopAtStepHook, StepCounterHook, LoggingTensorHook,
// NanTensorHook, SummarySaverHook and FinalOpsHook. The Estimator's own stop, loss-line,
// step-rate, NaN and summary rules are these hooks (see Estimator::train).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "estimator/hooks/session_run_hook.h"
#include "estimator/hooks/timer.h"
#include "ops/error.h"

namespace est {

// Raised by NanTensorHook: the loss became NaN at a step (TF's NanLossDuringTrainingError).
class NanLossDuringTrainingError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

namespace hooks {

// Requests a stop once the global step reaches `last_step`, or `num_steps` steps after the
// step at which the session started. Exactly one of the two.
class StopAtStepHook : public SessionRunHook {
 public:
  StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step);
  void after_create_session(Session& session) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  std::optional<int64_t> last_step() const { return last_step_; }

 private:
  std::optional<int64_t> num_steps_;
  std::optional<int64_t> last_step_;
};

// Logs "global_step/sec: N" and writes it as a summary to `output_dir` (when set) every
// `every_n_steps` steps or `every_n_secs` seconds.
class StepCounterHook : public SessionRunHook {
 public:
  StepCounterHook(std::optional<int64_t> every_n_steps, std::optional<double> every_n_secs,
                  std::string output_dir = {}, Clock clock = {});
  void begin() override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  const std::vector<double>& rates() const { return rates_; }  // every value logged

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::vector<double> rates_;
};

// Logs "tag = value, tag = value (0.500 sec)" every `every_n_iter` steps or `every_n_secs`
// seconds (and at the end when at_end). Each entry is (tag, fetch name): the Estimator logs
// {"loss", "loss"}, {"step", "global_step"}.
class LoggingTensorHook : public SessionRunHook {
 public:
  using Entries = std::vector<std::pair<std::string, std::string>>;
  LoggingTensorHook(Entries tensors, std::optional<int64_t> every_n_iter,
                    std::optional<double> every_n_secs = {}, bool at_end = false, Clock clock = {});
  explicit LoggingTensorHook(const std::vector<std::string>& names, int64_t every_n_iter = 100);
  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

 private:
  Entries tensors_;
  SecondOrStepTimer timer_;
  bool at_end_;
  bool log_this_step_ = false;
  int64_t iteration_ = 0;
  std::map<std::string, Tensor> last_values_;
};

// Checks the loss each step: NaN (or infinity) raises NanLossDuringTrainingError naming the
// step, or, with fail_on_nan_loss = false, logs an error and stops training.
class NanTensorHook : public SessionRunHook {
 public:
  explicit NanTensorHook(std::string loss_name = "loss", bool fail_on_nan_loss = true);
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

 private:
  std::string loss_name_;
  bool fail_on_nan_loss_;
};

// Writes the named scalar fetches (default: the loss) as summaries to `output_dir` every
// `save_steps` steps or `save_secs` seconds, at the global step after the step, together with
// every summary model_fn recorded in that step (est::summary::*; TF's hook given the
// Estimator's scaffold, whose summary_op merges all of them). A fetch may be any name a hook
// can fetch, est::identity's names included.
class SummarySaverHook : public SessionRunHook {
 public:
  SummarySaverHook(std::optional<int64_t> save_steps, std::optional<double> save_secs,
                   std::string output_dir, std::vector<std::string> tensors = {"loss"},
                   Clock clock = {});
  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::vector<std::string> tensors_;
  bool save_this_step_ = false;
};

// Reads the named variables (or "global_step") when the loop ends; final_ops_values() holds
// them afterwards (tf.train.FinalOpsHook).
class FinalOpsHook : public SessionRunHook {
 public:
  explicit FinalOpsHook(std::vector<std::string> final_ops) : final_ops_(std::move(final_ops)) {}
  void end(Session& session) override;
  const std::map<std::string, Tensor>& final_ops_values() const { return values_; }

 private:
  std::vector<std::string> final_ops_;
  std::map<std::string, Tensor> values_;
};

}  // namespace hooks
}  // namespace est
