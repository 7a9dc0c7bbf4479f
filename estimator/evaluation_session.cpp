// EvaluationSession: restore, model_fn(EVAL) per replica, the running metrics and mean loss,
// the progress log, inside the hooks' life cycle (HookedSession).
#include "estimator/evaluation_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/error.h"
#include "ops/logging.h"

namespace est::detail {
namespace {

// The line that names the strategy, then the checkpoint restored into every replica's store.
std::optional<Restored> restore_replicas(Replicas& replicas,
                                         const EvaluationSessionOptions& options) {
  replicas.log_strategy("evaluation");
  return restore_for_inference("evaluate", options.checkpoint_path, options.model.config->model_dir,
                               replicas.stores());
}

}  // namespace

EvaluationSession::EvaluationSession(EvaluationSessionOptions options)
    : options_(std::move(options)),
      replicas_(options_.model.config->eval_distribute, ModeKeys::kEval, options_.model.seed,
                *options_.model.params, *options_.model.config),
      restored_(restore_replicas(replicas_, options_)),
      iterator_(replicas_.make_dataset(options_.model.input_fn, ModeKeys::kEval).iterator()),
      hooked_(Session(replicas_.store(), ModeKeys::kEval, options_.model.config->model_dir,
                      *options_.model.config),
              options_.hooks),
      log_every_(options_.steps ? std::max<int64_t>(1, *options_.steps / 10) : 100) {}

bool EvaluationSession::should_stop() const {
  return stopped_ || (options_.steps && batches_ >= *options_.steps);
}

std::vector<data::Element> EvaluationSession::next_batch() {
  timings_.input_begin = steady_seconds();
  return replicas_.next(iterator_);
}

void EvaluationSession::run(const std::vector<data::Element>& batch) {
  if (batch.empty()) {
    stopped_ = true;
    return;
  }
  timings_.model_fn_begin = steady_seconds();
  const bool first = !hooked_.began();
  std::vector<EstimatorSpec> specs =
      replicas_.call_model_fn(options_.model.model_fn, batch, ModeKeys::kEval, first);
  EstimatorSpec spec = replicas_.step_spec(specs);
  int64_t step = hooked_.session().global_step();
  if (first) {
    if (restored_) check_restored(*restored_, replicas_.store());
    // A hook that assigned in after_create_session: the first batch sees its values, as TF's.
    if (hooked_.create(spec.evaluation_hooks)) {
      specs = replicas_.call_model_fn(options_.model.model_fn, batch, ModeKeys::kEval, false);
      spec = replicas_.step_spec(specs);
    }
  }
  timings_.model_fn_end = steady_seconds();
  bool stop_requested = hooked_.run(spec, step, timings_, [&] {
    loss_sum_ += spec.loss.item();
    for (const EstimatorSpec& replica_spec : specs) {
      for (const auto& [metric_name, op] : replica_spec.eval_metric_ops) {
        auto& total = running_[metric_name];
        if (!total)
          total = op.metric->clone();
        else
          total->merge(*op.metric);
      }
    }
    ++batches_;
  });
  const std::optional<int64_t>& steps = options_.steps;
  if (batches_ % log_every_ == 0 || (steps && batches_ == *steps))
    log::info("Evaluation [{}/{}]", batches_, steps ? std::to_string(*steps) : "?");
  if (stop_requested) stopped_ = true;
}

void EvaluationSession::close() {
  if (batches_ == 0)
    throw OutOfRangeError(fmt::format(
        "evaluate: input_fn's dataset produced no batch (model_dir {}); an evaluation needs "
        "at least one",
        options_.model.config->model_dir));
  hooked_.close();
}

std::map<std::string, double> EvaluationSession::results() const {
  std::map<std::string, double> results;
  for (const auto& [metric_name, total] : running_) results[metric_name] = total->result();
  if (!results.count("loss")) results["loss"] = loss_sum_ / static_cast<double>(batches_);
  results["global_step"] = static_cast<double>(hooked_.session().global_step());
  return results;
}

}  // namespace est::detail
