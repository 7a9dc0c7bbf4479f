// Estimator::evaluate: the loop over an EvaluationSession (restore, model_fn(EVAL) over `steps`
// batches or all of them, the streamed metrics and mean loss), then, as TF's _evaluate_run,
// the results logged and written as summaries of the checkpoint's global step.
#include <fmt/format.h>

#include "estimator/estimator.h"
#include "estimator/evaluation_session.h"
#include "estimator/summary_cache.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

// The results logged ("Saving dict for global step ...") and written to `output_dir` as
// scalars of their global step, as TF's _write_dict_to_summary.
void write_dict_to_summary(const Metrics& results, const std::string& output_dir) {
  auto global_step = static_cast<int64_t>(results.at("global_step"));
  std::string line;
  for (const auto& [key, value] : results)
    line += fmt::format("{}{} = {}", line.empty() ? "" : ", ", key,
                        key == "global_step" ? fmt::format("{}", global_step)
                                             : fmt::format("{}", static_cast<float>(value)));
  log::info("Saving dict for global step {}: {}", global_step, line);
  auto writer = summary_writer_for(output_dir);
  for (const auto& [key, value] : results)
    if (key != "global_step") writer->add_scalar(key, value, global_step);
  writer->flush();
}

}  // namespace

Metrics Estimator::evaluate(const InputFn& input_fn, const EvaluateOptions& options) {
  const auto& [steps, hooks, checkpoint_path, name] = options;
  if (steps && *steps <= 0)
    throw InvalidArgumentError(fmt::format(
        "evaluate: steps must be positive (or unset to read all input), got {}", *steps));
  if (name.find('/') != std::string::npos)
    throw InvalidArgumentError(
        fmt::format("evaluate: name '{}' contains '/'; it names the directory eval_<name>", name));
  detail::check_hooks(hooks, "evaluate");
  detail::EvaluationSession session({.model = {model_fn_, input_fn, &config_, seed_, &params_},
                                     .steps = steps,
                                     .checkpoint_path = checkpoint_path,
                                     .hooks = hooks});
  log::info("Starting evaluation at {}", detail::now_iso8601());
  double start = detail::steady_seconds();
  while (!session.should_stop()) session.run(session.next_batch());
  session.close();
  log::info("Inference Time : {:.5f}s", detail::steady_seconds() - start);
  log::info("Finished evaluation at {}", detail::now_iso8601());

  Metrics results = session.results();
  write_dict_to_summary(results, eval_dir(name));
  return results;
}

}  // namespace est
