// Scaffold: TF's tf.compat.v1.train.Scaffold (tensorflow/python/training/monitored_session.py)
// as far as a define-by-run model_fn needs one: its init_fn.
//
// TF builds the session in this order (session_manager.py, SessionManager.prepare_session):
// restore the latest checkpoint of model_dir; only when there was none, run the init op (the
// variables' initializers, which warm start has rewired to the old checkpoint) and then
// init_fn(scaffold, session). So init_fn sees warm-started values and may overwrite them, and a
// run resumed from its own checkpoint never calls it. The Estimator calls it once, after the
// first model_fn call created the variables and before that step's update, then calls model_fn
// again so that step 0's forward pass already uses what init_fn assigned.
//
// The other Scaffold members have no work here: there is no graph to finalize, no init or
// ready op (variables exist once model_fn made them), the summary op is every summary the
// model_fn recorded (est::summary), and the saver is the CheckpointSaverHook.
#pragma once

#include <functional>

#include "estimator/hooks/session_run_hook.h"

namespace est {

struct Scaffold {
  // Assign through session.store().assign(name, value) (pretrained weights, say: read them from
  // est's or TensorFlow's checkpoint with checkpoint::open_checkpoint). With several
  // replicas it runs on the first replica's variables and the others receive copies; on a
  // multi-worker job every worker runs it (pass the same values everywhere).
  std::function<void(Session& session)> init_fn;
};

}  // namespace est
