// train_and_evaluate (tf.estimator.train_and_evaluate), following tensorflow_estimator's
// training.py. The task's role comes from RunConfig (TF_CONFIG):
//   - local (no cluster): one train() call whose checkpoint listener evaluates after each save
//     except the first (the start of training), skipping saves that come within
//     eval_spec.throttle_secs of the previous evaluation, then a final evaluation of the last
//     checkpoint. Each evaluation runs the EvalSpec's exporters. Returns the last metrics and
//     the exports.
//   - chief (and TF1's master): trains and writes checkpoints and summaries. When TF_CONFIG's
//     cluster lists no evaluator it also evaluates as local mode does and returns the results
//     (TF would evaluate nowhere); with an evaluator listed it returns nothing. (TensorFlow
//     runs the evaluator outside the cluster; listing it there, as est-launch does, is how the
//     chief learns that someone else evaluates.)
//   - worker: trains; returns nothing.
//   - evaluator (estimator/evaluator.h): evaluates each new checkpoint until the one at
//     max_steps; returns its last evaluation.
//   - ps: serves the variables the workers place on it and applies their updates until the
//     job ends (estimator/ps_task.h); returns nothing.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "estimator/estimator.h"
#include "estimator/specs.h"

namespace est {

// The last evaluation's metrics and the directories the exporters wrote, in order.
using TrainAndEvaluateResult = std::pair<Metrics, std::vector<std::string>>;

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec);

}  // namespace est
