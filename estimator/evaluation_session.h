// EvaluationSession: the one object that owns an evaluation (internal to estimator/), as TF's
// evaluation._evaluate_once (tensorflow/python/training/evaluation.py, which tensorflow_estimator's
// estimator.py calls from _evaluate_run) runs it in a MonitoredSession:
// `while not session.should_stop(): session.run(eval_ops)`, then the final ops.
//
// It holds the replicas of RunConfig::eval_distribute and their variables, the input iterator,
// the restored checkpoint (checkpoint_path, else model_dir's latest), the hooks' life cycle
// (estimator/hooked_session.h) and the running metrics. Evaluation records no tape (a
// NoGradGuard for the session's life). A step, run(batch): model_fn(EVAL) on every replica
// (one batch each; fewer at the input's end); after the first call (the variables exist then)
// the restore is checked, the spec's evaluation_hooks join, the hooks begin and see the session,
// and model_fn runs again when after_create_session assigned a variable; then before_run, each
// replica's metric statistics merged into the running metric of that name (first batch: a
// clone), the loss summed, after_run. Under eval_distribute the results thus equal
// unreplicated evaluation of the same data. It stops after `steps` batches (TF's
// _StopAfterNEvalsHook), at the input's end, or when a hook asks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "estimator/hooked_session.h"
#include "estimator/loop_util.h"
#include "estimator/params.h"
#include "estimator/replicas.h"
#include "estimator/run_config.h"
#include "estimator/specs.h"
#include "nn/metrics.h"
#include "ops/autograd.h"

namespace est::detail {

struct EvaluationSessionOptions {
  SessionModel model;
  std::optional<int64_t> steps;  // unset: until the input ends
  std::optional<std::string> checkpoint_path;
  Hooks hooks;  // before the spec's evaluation_hooks
};

class EvaluationSession {
 public:
  // Makes the replicas and the input, and restores the checkpoint.
  explicit EvaluationSession(EvaluationSessionOptions options);

  // Whether evaluation is over: `steps` batches ran, the input ended, or a hook asked to stop.
  bool should_stop() const;
  // The next step's elements: one per replica, fewer (or none) at the input's end.
  std::vector<data::Element> next_batch();
  // One step on `batch` (see above); an empty batch stops the session.
  void run(const std::vector<data::Element>& batch);
  // Ends the hooks. OutOfRangeError when no batch ran: an evaluation needs one.
  void close();
  // The final ops, after close(): every metric's result, "loss" (the batches' mean loss unless
  // a metric has that name) and "global_step" (the checkpoint's).
  std::map<std::string, double> results() const;

 private:
  ops::NoGradGuard no_grad_;
  EvaluationSessionOptions options_;
  Replicas replicas_;
  std::optional<Restored> restored_;
  data::Iterator iterator_;
  HookedSession hooked_;
  std::map<std::string, std::shared_ptr<nn::metrics::Metric>> running_;
  double loss_sum_ = 0;
  int64_t batches_ = 0;
  int64_t log_every_;
  bool stopped_ = false;
  StepTimings timings_;
};

}  // namespace est::detail
