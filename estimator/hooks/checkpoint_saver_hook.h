// CheckpointSaverHook and CheckpointSaverListener (tf.estimator.CheckpointSaverHook).
//
// Saves at the start of training (after the variables exist), every `save_steps` steps or
// `save_secs` seconds, and at the end when the last step was not saved yet. The bundle comes
// from the Session (variables, slots, global step, RNG states, input position) and goes to a
// CheckpointManager (background write, retention); a checkpoint is named after the global_step
// read with its variables (where they live on parameter servers, another worker's update may
// land after the step that triggered the save). Listeners run around each save;
// after_save returning true stops training (train_and_evaluate evaluates there).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manager.h"
#include "estimator/hooks/session_run_hook.h"
#include "estimator/hooks/timer.h"

namespace est {

class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  virtual void begin() {}
  virtual void before_save(Session& /*session*/, int64_t /*global_step*/) {}
  // True requests that training stop.
  virtual bool after_save(Session& /*session*/, int64_t /*global_step*/) { return false; }
  virtual void end(Session& /*session*/, int64_t /*global_step*/) {}
};

using Listeners = std::vector<std::shared_ptr<CheckpointSaverListener>>;

namespace hooks {

using est::CheckpointSaverListener;

struct CheckpointSaverOptions {
  std::string checkpoint_dir;
  std::optional<double> save_secs;    // at most one of the two;
  std::optional<int64_t> save_steps;  // neither: only the start and end saves
  std::string checkpoint_basename = "model.ckpt";
  int keep_checkpoint_max = 5;
  double keep_checkpoint_every_n_hours = 10000;
  bool is_chief = true;
  int task_id = 0;
  bool async = true;  // write in the background (the bundle is snapshotted first)
  Listeners listeners;
  Clock clock;                        // empty: the system clock
  bool tf_checkpoint_format = false;  // also in TensorFlow's format (RunConfig's field)
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  explicit CheckpointSaverHook(CheckpointSaverOptions options);

  void begin() override;
  // When the session agrees on saves before steps (a multi-worker job's chief), after_run
  // saves exactly when will_save_after said so, from the first step on.
  void after_create_session(Session& session) override;
  // Decides now, before the step that ends at global step `step`, whether that step saves.
  bool will_save_after(int64_t step) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // Paths of the saves this hook made, in order (after end(): all of them are on disk).
  const std::vector<std::string>& saved() const { return saved_; }

 private:
  // Saves the session's state at `step`; returns whether a listener asked to stop.
  bool save(Session& session, int64_t step);

  CheckpointSaverOptions options_;
  SecondOrStepTimer timer_;
  std::unique_ptr<checkpoint::CheckpointManager> manager_;
  std::vector<std::string> saved_;
  bool decided_externally_ = false;
  int64_t decided_step_ = -1;  // the step will_save_after() said saves, -1: none
};

}  // namespace hooks
}  // namespace est
