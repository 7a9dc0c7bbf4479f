// train_and_evaluate: the evaluation listener (first save skipped, throttle, final
// evaluation) around a single Estimator::train call.
#include "estimator/train_and_evaluate.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "estimator/exporter.h"
#include "estimator/hooks/timer.h"
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
    metrics = estimator_.evaluate(spec_.input_fn, spec_.steps, spec_.hooks, checkpoint, spec_.name);
    last_eval_time_ = estimator_.config().now();
    last_evaluated_step_ = global_step;
    for (const auto& exporter : spec_.exporters) {
      std::string path =
          (std::filesystem::path(estimator_.model_dir()) / "export" / exporter->name()).string();
      if (auto written = exporter->export_model(estimator_, path, checkpoint, metrics, is_final))
        exports.push_back(*written);
    }
  }

  Estimator& estimator_;
  const EvalSpec& spec_;
  bool first_save_ = true;
  std::optional<double> last_eval_time_;
  std::optional<int64_t> last_evaluated_step_;
};

}  // namespace

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec) {
  validate(train_spec);
  validate(eval_spec);
  log::info("Running training and evaluation locally (non-distributed).");
  auto listener = std::make_shared<EvaluateListener>(estimator, eval_spec);
  estimator.train(train_spec.input_fn, train_spec.hooks, std::nullopt, train_spec.max_steps,
                  {listener});
  // Training may have been skipped (max_steps already reached): still report an evaluation.
  if (listener->metrics.empty() && estimator.latest_checkpoint()) {
    auto step = estimator.get_variable_value("global_step").item();
    listener->final_evaluation(static_cast<int64_t>(step));
  }
  return {listener->metrics, listener->exports};
}

}  // namespace est
