// train_and_evaluate (tf.estimator.train_and_evaluate), local mode: one train() call whose
// checkpoint listener evaluates after each save except the first (the start of training),
// skipping saves that come within eval_spec.throttle_secs of the previous evaluation, then a
// final evaluation of the last checkpoint. Each evaluation runs the EvalSpec's exporters.
// Distributed roles (a separate evaluator task, start_delay_secs) arrive with distribute/.
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
