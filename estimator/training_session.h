// TrainingSession: the one object that owns a training step (internal to estimator/), as TF's
// MonitoredTrainingSession (tensorflow/python/training/monitored_session.py) owns it for the
// Estimator, whose loop is `while not mon_sess.should_stop(): mon_sess.run(train_op)`.
//
// It holds what TF's session creator and hooked session hold: the replicas and their variables,
// the input iterator, the restore of the latest checkpoint (variables, RNG states, input
// position) or else the warm start, the start checkpoint, and the hooks' life cycle
// (estimator/hooked_session.h, which evaluation and prediction share). Hooks,
// the checkpoint saver included, are reached only through SessionRunHook. A step, run(batch),
// has three phases:
//   1. agreement (several workers only): every worker says whether it has a whole step of
//      input and whether a hook asked it to stop, and the chief whether a hook saves after the
//      step (SessionRunHook::will_save_after); one small all-reduce combines them (WorkerSync),
//      so that every worker runs the same steps; when they agree to stop, the batch this
//      worker read goes back to the input (data::Iterator::put_back), so every worker's saved
//      position is the one after the last step it trained;
//   2. model_fn on every replica; after the first call (the variables exist then) the restore
//      is checked or the warm start applied, and the hooks begin (the saver's start checkpoint)
//      and see the session (after_create_session); when the warm start, Scaffold.init_fn or a
//      hook assigned a variable, model_fn runs again, so that step 0 computes with those values;
//   3. before_run, the train ops (gradients, the strategy's sum over replicas, the update),
//      every worker's input position when the chief saves, after_run.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/warm_start.h"
#include "data/dataset.h"
#include "estimator/hooked_session.h"
#include "estimator/loop_util.h"
#include "estimator/params.h"
#include "estimator/replicas.h"
#include "estimator/run_config.h"
#include "estimator/specs.h"
#include "estimator/worker_sync.h"
#include "ops/random.h"

namespace est::detail {

// One step's input: one element per local replica (fewer, or none, when the input ended).
using StepBatch = std::vector<data::Element>;

struct TrainingSessionOptions {
  SessionModel model;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  // train()'s steps / max_steps: the global step training stops at, known before the step
  // (StopAtStepHook's rule), lets workers stop without reading another batch.
  std::optional<int64_t> steps;
  std::optional<int64_t> max_steps;
  // As MonitoredTrainingSession's: `hooks` run on every worker, then the spec's training_hooks
  // (and on the chief its training_chief_hooks), then `chief_only_hooks`.
  Hooks hooks;
  Hooks chief_only_hooks;
};

class TrainingSession {
 public:
  // Makes the replicas and the input, and restores the latest checkpoint of model_dir.
  explicit TrainingSession(TrainingSessionOptions options);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Whether training is over: a hook asked it to stop, the input ended, or (several workers)
  // the stop step is reached.
  bool should_stop() const;
  // The next step's elements.
  StepBatch next_batch();
  // One step on `batch` (see the phases above). It may stop the session instead (the input
  // ended here or on another worker, or another worker's hook asked to stop).
  void run(const StepBatch& batch);
  // Ends the hooks (the saver's end checkpoint) after the last step; nothing when no step ran.
  void close();

  // The loss of the last step (NaN before the first).
  double final_loss() const { return final_loss_; }

 private:
  int64_t global_step() const { return hooked_.session().global_step(); }
  // Phase 1: false when the workers agree to stop before this step.
  bool agree(bool whole_step, int64_t step);
  // model_fn on every replica, a mismatch with the restored checkpoint naming its file.
  std::vector<EstimatorSpec> call_model_fn(const StepBatch& batch);
  // After the first model_fn call: restore check or warm start, then the hooks begin.
  void create(const StepBatch& batch, std::vector<EstimatorSpec>& specs, int64_t step);
  // Phase 3.
  void run_step(const std::vector<EstimatorSpec>& specs, int64_t step);
  // The restored checkpoint's values that no variable took (optimizer state), to a gradient
  // path that keeps that state elsewhere (parameter servers).
  void send_restored_state();
  // `values` (optimizer state no variable took: restored, or staged by the warm start) to a
  // gradient path that keeps that state elsewhere.
  void send_state(const std::vector<std::pair<std::string, Tensor>>& values);
  // The RNG states and input position of the restored checkpoint.
  void restore_extras();
  // Variables, slots, global step, RNG states and input positions, for the saver.
  checkpoint::TensorBundle checkpoint_bundle();

  TrainingSessionOptions options_;
  const RunConfig& config_;
  Replicas replicas_;
  data::Dataset dataset_;
  std::unique_ptr<data::Iterator> iterator_;
  WorkerSync sync_;
  std::optional<Restored> restored_;
  // The hooks' life cycle and the Session they see: options_.hooks, then the spec's (first
  // step), then the chief's.
  HookedSession hooked_;
  // The start checkpoint is written after the first model_fn call (the variables exist then)
  // but describes the state before that step: its input position and model RNG.
  bool at_start_ = true;
  std::string start_position_;
  std::array<uint64_t, 4> start_model_rng_{};  // ops::Generator::state()
  std::vector<std::string> positions_;  // every worker's input position, for the chief's save
  std::optional<int64_t> stop_step_;
  WorkerSync::Decision decision_;  // this step's agreement
  bool stop_pending_ = false;      // a hook asked this worker to stop (several workers)
  bool stopped_ = false;
  // Restored from TensorFlow's checkpoint: the variables the first step created (optimizer
  // slots) are checked against it after that step, as TF's Saver would have restored them.
  bool check_after_step_ = false;
  StepTimings timings_;
  double final_loss_;
};

}  // namespace est::detail
