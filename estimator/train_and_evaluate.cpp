// train_and_evaluate: the roles of TF_CONFIG's tasks, and the evaluation listener (first save
// skipped, throttle, final evaluation) around a single Estimator::train call.
#include "estimator/train_and_evaluate.h"

#include <fmt/format.h>

#include <memory>

#include "distribute/cluster/cluster_spec.h"
#include "estimator/evaluator.h"
#include "estimator/exporter.h"
#include "estimator/hooks/timer.h"
#include "estimator/ps_task.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

class EvaluateListener : public CheckpointSaverListener {
 public:
  EvaluateListener(Estimator& estimator, const EvalSpec& spec)
      : estimator_(estimator), spec_(spec) {}

  void begin() override { first_save_ = true; }

  bool after_save(Session& /*session*/, int64_t global_step) override {
    if (first_save_) {  // the checkpoint written when training starts
      first_save_ = false;
      return false;
    }
    double now = estimator_.config().now();
    if (last_eval_time_ && now - *last_eval_time_ < spec_.throttle_secs) {
      log::info("Skip the current checkpoint eval due to throttle secs ({} secs).",
                spec_.throttle_secs);
      return false;
    }
    evaluate_and_export(global_step, false);
    return false;
  }

  void end(Session& /*session*/, int64_t global_step) override { final_evaluation(global_step); }

  // Evaluates the latest checkpoint unless it was evaluated already.
  void final_evaluation(int64_t global_step) {
    if (last_evaluated_step_ == global_step) return;
    if (!estimator_.latest_checkpoint()) return;
    evaluate_and_export(global_step, true);
  }

  Metrics metrics;
  std::vector<std::string> exports;

 private:
  void evaluate_and_export(int64_t global_step, bool is_final) {
    std::string checkpoint = estimator_.latest_checkpoint().value_or("");
    auto [results, written] = detail::evaluate_and_export(estimator_, spec_, checkpoint, is_final);
    metrics = std::move(results);
    exports.insert(exports.end(), written.begin(), written.end());
    last_eval_time_ = estimator_.config().now();
    last_evaluated_step_ = global_step;
  }

  Estimator& estimator_;
  const EvalSpec& spec_;
  bool first_save_ = true;
  std::optional<double> last_eval_time_;
  std::optional<int64_t> last_evaluated_step_;
};

// Local mode, and the chief (or TF1's master) when nobody else evaluates: one train() call
// whose listener evaluates after each checkpoint, then a final evaluation.
TrainAndEvaluateResult train_with_evaluation(Estimator& estimator, const TrainSpec& train_spec,
                                             const EvalSpec& eval_spec) {
  auto listener = std::make_shared<EvaluateListener>(estimator, eval_spec);
  estimator.train(train_spec.input_fn, {.hooks = train_spec.hooks,
                                        .max_steps = train_spec.max_steps,
                                        .saving_listeners = {listener}});
  // Training may have been skipped (max_steps already reached): still report an evaluation.
  if (listener->metrics.empty() && estimator.latest_checkpoint()) {
    auto step = estimator.get_variable_value("global_step").item();
    listener->final_evaluation(static_cast<int64_t>(step));
  }
  return {listener->metrics, listener->exports};
}

void log_role(const RunConfig& config) {
  log::info("Training with task_type = {}, task_id = {}", config.task_type, config.task_id);
}

}  // namespace

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec) {
  validate(train_spec);
  validate(eval_spec);
  const RunConfig& config = estimator.config();
  using distribute::TaskType;
  // TensorFlow's dispatch (training.py _TrainingExecutor.run): local unless TF_CONFIG names a
  // cluster, or this task is the evaluator (which sits outside the cluster).
  if (config.task_type == TaskType::kEvaluator)
    return detail::run_evaluator(estimator, train_spec, eval_spec);
  if (config.cluster_spec.empty()) {
    log::info("Running training and evaluation locally (non-distributed).");
    return train_with_evaluation(estimator, train_spec, eval_spec);
  }
  // Under MultiWorkerMirroredStrategy worker 0 is the chief when the cluster has none.
  TaskType role = config.is_chief && config.task_type == TaskType::kWorker ? TaskType::kChief
                                                                           : config.task_type;
  switch (role) {
    case TaskType::kChief:
    case TaskType::kMaster:
      log_role(config);
      if (!config.cluster_spec.has_job(TaskType::kEvaluator)) {
        log::info(
            "TF_CONFIG's cluster lists no evaluator task: the {} evaluates each "
            "checkpoint.",
            config.task_type);
        return train_with_evaluation(estimator, train_spec, eval_spec);
      }
      estimator.train(train_spec.input_fn,
                      {.hooks = train_spec.hooks, .max_steps = train_spec.max_steps});
      return {};
    case TaskType::kWorker:
      log_role(config);
      estimator.train(train_spec.input_fn,
                      {.hooks = train_spec.hooks, .max_steps = train_spec.max_steps});
      return {};
    case TaskType::kPs:
      log_role(config);
      detail::run_parameter_server(estimator, train_spec);
      return {};
    case TaskType::kEvaluator:
      break;
  }
  throw InternalError("train_and_evaluate: unknown task type");
}

}  // namespace est
