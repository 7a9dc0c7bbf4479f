// PredictionSession: the one object that owns a prediction (internal to estimator/), as TF's
// Estimator.predict (tensorflow_estimator/python/estimator/estimator.py) runs it in a
// MonitoredSession: `while not mon_sess.should_stop(): preds = mon_sess.run(predictions)`,
// and yields the rows of each batch.
//
// It holds the variables (one store, no strategy), the input iterator, the restored checkpoint
// (checkpoint_path, else model_dir's latest) and the hooks' life cycle
// (estimator/hooked_session.h). Prediction records no tape (a NoGradGuard for the session's
// life). A step, run(batch): model_fn(PREDICT); after the first call (the variables exist
// then) the restore is checked, the spec's prediction_hooks join, the hooks begin and see the
// session, and model_fn runs again when after_create_session assigned a variable; then
// before_run, the predictions predict_keys selects (checked: every key known, every tensor
// batched alike), after_run. It stops at the input's end or when a hook asks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "estimator/hooked_session.h"
#include "estimator/loop_util.h"
#include "estimator/params.h"
#include "estimator/run_config.h"
#include "estimator/specs.h"
#include "ops/autograd.h"

namespace est::detail {

struct PredictionSessionOptions {
  SessionModel model;
  std::vector<std::string> predict_keys;  // empty: every prediction
  std::optional<std::string> checkpoint_path;
  Hooks hooks;  // before the spec's prediction_hooks
};

// One batch's selected predictions by name, on the host, each [batch, ...].
using BatchPredictions = std::vector<std::pair<std::string, Tensor>>;

class PredictionSession {
 public:
  // Restores the checkpoint and makes the input.
  explicit PredictionSession(PredictionSessionOptions options);

  // Whether prediction is over: the input ended, or a hook asked to stop.
  bool should_stop() const { return stopped_; }
  // The next batch: one element, or none at the input's end.
  std::vector<data::Element> next_batch();
  // One step on `batch` (see above): its predictions. An empty batch stops the session and
  // gives none.
  BatchPredictions run(const std::vector<data::Element>& batch);
  // Ends the hooks (nothing when no batch ran).
  void close() { hooked_.close(); }

 private:
  ops::NoGradGuard no_grad_;
  PredictionSessionOptions options_;
  nn::VariableStore store_;
  EstimatorContext context_;
  std::optional<Restored> restored_;
  data::Iterator iterator_;
  HookedSession hooked_;
  bool stopped_ = false;
  StepTimings timings_;
};

}  // namespace est::detail
