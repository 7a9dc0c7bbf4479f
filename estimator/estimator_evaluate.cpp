// Estimator::evaluate: restore a checkpoint, run model_fn(EVAL) over `steps` batches (or all
// of them), stream each metric (first batch: clone, then merge), average the loss, log and
// write the results as summaries of the checkpoint's global step. Under eval_distribute a step
// is one batch per replica, and every replica's metric statistics are merged into the same
// running metric, so the results equal unreplicated evaluation of the same data.
#include <fmt/format.h>

#include <memory>

#include "estimator/estimator.h"
#include "estimator/loop_util.h"
#include "estimator/replicas.h"
#include "estimator/summary_cache.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {

Metrics Estimator::evaluate(const InputFn& input_fn, std::optional<int64_t> steps,
                            const Hooks& hooks, const std::optional<std::string>& checkpoint_path,
                            const std::string& name) {
  if (steps && *steps <= 0)
    throw InvalidArgumentError(fmt::format(
        "evaluate: steps must be positive (or unset to read all input), got {}", *steps));
  if (name.find('/') != std::string::npos)
    throw InvalidArgumentError(
        fmt::format("evaluate: name '{}' contains '/'; it names the directory eval_<name>", name));
  detail::check_hooks(hooks, "evaluate");

  detail::Replicas replicas(config_.eval_distribute, ModeKeys::kEval, seed_, params_, config_);
  replicas.log_strategy("evaluation");
  nn::VariableStore& store = replicas.store();
  std::string source = checkpoint_path ? *checkpoint_path : latest_checkpoint().value_or("");
  std::optional<detail::Restored> restored;
  if (!source.empty()) restored = detail::restore_checkpoint(source, replicas.stores());
  if (checkpoint_path && !restored)
    throw NotFoundError(fmt::format("evaluate: no checkpoint at {}", *checkpoint_path));
  if (!restored)
    log::warning(
        "Could not find trained model in model_dir: {}, running initialization to "
        "evaluate.",
        model_dir());

  ops::NoGradGuard no_grad;
  data::Dataset dataset = replicas.make_dataset(input_fn, ModeKeys::kEval);
  data::Iterator iterator = dataset.iterator();
  Session session(store, ModeKeys::kEval, model_dir(), config_);
  log::info("Starting evaluation at {}", detail::now_iso8601());
  double start = detail::steady_seconds();

  Hooks all_hooks(hooks.begin(), hooks.end());
  std::map<std::string, std::shared_ptr<nn::metrics::Metric>> running;
  double loss_sum = 0;
  int64_t batches = 0;
  StepTimings timings;
  int64_t log_every = steps ? std::max<int64_t>(1, *steps / 10) : 100;
  for (;;) {
    if (steps && batches >= *steps) break;
    timings.input_begin = detail::steady_seconds();
    std::vector<data::Element> elements = replicas.next(iterator);
    if (elements.empty()) break;
    timings.model_fn_begin = detail::steady_seconds();
    std::vector<EstimatorSpec> specs =
        replicas.call_model_fn(model_fn_, elements, ModeKeys::kEval, batches == 0);
    EstimatorSpec spec = replicas.step_spec(specs);
    int64_t step = session.global_step();
    if (batches == 0) {
      if (restored) detail::check_restored(*restored, store);
      all_hooks.insert(all_hooks.end(), spec.evaluation_hooks.begin(), spec.evaluation_hooks.end());
      detail::begin_hooks(all_hooks);
      // A hook that assigned in after_create_session: the first batch sees its values, as TF's.
      if (detail::after_create_session(all_hooks, session)) {
        specs = replicas.call_model_fn(model_fn_, elements, ModeKeys::kEval, false);
        spec = replicas.step_spec(specs);
      }
    }
    timings.model_fn_end = detail::steady_seconds();
    SessionRunContext run_context(session, spec, step, timings);
    std::vector<SessionRunArgs> args = detail::before_run(all_hooks, run_context);
    timings.run_begin = detail::steady_seconds();
    loss_sum += spec.loss.item();
    for (const EstimatorSpec& replica_spec : specs) {
      for (const auto& [metric_name, op] : replica_spec.eval_metric_ops) {
        auto& total = running[metric_name];
        if (!total)
          total = op.metric->clone();
        else
          total->merge(*op.metric);
      }
    }
    ++batches;
    timings.run_end = detail::steady_seconds();
    detail::after_run(all_hooks, run_context,
                      detail::resolve_fetches(args, spec, session, step, step));
    if (steps ? batches % log_every == 0 || batches == *steps : batches % log_every == 0)
      log::info("Evaluation [{}/{}]", batches, steps ? std::to_string(*steps) : "?");
    if (run_context.stop_requested()) break;
  }
  if (batches == 0)
    throw OutOfRangeError(fmt::format(
        "evaluate: input_fn's dataset produced no batch (model_dir {}); an evaluation needs "
        "at least one",
        model_dir()));
  detail::end_hooks(all_hooks, session);
  log::info("Inference Time : {:.5f}s", detail::steady_seconds() - start);
  log::info("Finished evaluation at {}", detail::now_iso8601());

  int64_t global_step = session.global_step();
  Metrics results;
  for (const auto& [metric_name, total] : running) results[metric_name] = total->result();
  if (!results.count("loss")) results["loss"] = loss_sum / static_cast<double>(batches);
  results["global_step"] = static_cast<double>(global_step);

  std::string line;
  for (const auto& [key, value] : results)
    line += fmt::format("{}{} = {}", line.empty() ? "" : ", ", key,
                        key == "global_step" ? fmt::format("{}", global_step)
                                             : fmt::format("{}", static_cast<float>(value)));
  log::info("Saving dict for global step {}: {}", global_step, line);
  auto writer = summary_writer_for(eval_dir(name));
  for (const auto& [key, value] : results)
    if (key != "global_step") writer->add_scalar(key, value, global_step);
  writer->flush();
  return results;
}

}  // namespace est
