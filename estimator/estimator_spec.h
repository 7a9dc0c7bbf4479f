// EstimatorSpec: what a model_fn returns (tf.estimator.EstimatorSpec), checked when built.
//
// TRAIN needs a loss and a train op, EVAL a loss, PREDICT predictions; the loss must be a
// scalar. A spec is made from its fields (designated initializers, like TF's keyword
// arguments) or with the three short forms the DESIGN.md model_fn uses:
//
//   return est::EstimatorSpec::train(loss, est::optim::sgd(0.1).minimize(loss, ctx));
//   return est::EstimatorSpec({.mode = mode, .loss = loss, .train_op = op, .training_hooks = h});
//
// Construction throws InvalidArgumentError naming the missing or bad field. The fields stay
// public (hooks read them); the Estimator checks each spec model_fn returns again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimator/export_output.h"
#include "estimator/hooks/session_run_hook.h"
#include "estimator/mode_keys.h"
#include "estimator/model_fn_records.h"
#include "estimator/scaffold.h"
#include "nn/metrics.h"
#include "nn/train_op.h"
#include "ops/tensor.h"

namespace est {

using Predictions = std::map<std::string, Tensor>;
using MetricOps = std::map<std::string, nn::metrics::MetricOp>;

struct EstimatorSpecFields {
  ModeKeys mode = ModeKeys::kTrain;
  Predictions predictions;    // name -> [batch, ...]
  Tensor loss;                // scalar
  nn::TrainOp train_op;       // TRAIN only
  MetricOps eval_metric_ops;  // EVAL: name -> streaming metric of this batch
  // Serving signatures (TF's export_outputs): signature name -> its output (a bare tensor is a
  // PredictOutput under key "output"; estimator/export_output.h).
  std::map<std::string, ExportOutput> export_outputs;
  Hooks training_hooks;
  Hooks training_chief_hooks;  // run on the chief only
  Hooks evaluation_hooks;
  Hooks prediction_hooks;
  Scaffold scaffold;  // init_fn (estimator/scaffold.h)
  // Filled by the Estimator after the call, from what model_fn recorded through its ctx
  // (estimator/summary_ops.h): model_fn leaves them empty.
  std::vector<SummaryValue> summaries;          // written by the SummarySaverHook
  std::map<std::string, Tensor> named_tensors;  // fetchable by name in hooks
};

struct EstimatorSpec : EstimatorSpecFields {
  explicit EstimatorSpec(EstimatorSpecFields fields);

  static EstimatorSpec train(Tensor loss, nn::TrainOp train_op, Hooks training_hooks = {});
  static EstimatorSpec eval(Tensor loss, MetricOps eval_metric_ops = {},
                            Hooks evaluation_hooks = {});
  static EstimatorSpec predict(Predictions predictions,
                               std::map<std::string, ExportOutput> export_outputs = {},
                               Hooks prediction_hooks = {});

  // The construction check again (for a spec whose fields were changed afterwards); `where`
  // prefixes the message ("model_fn (mode train, step 12)").
  void validate(const std::string& where = "EstimatorSpec") const;
};

}  // namespace est
