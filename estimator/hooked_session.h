// HookedSession: the hooks' life cycle around one Estimator loop, written once for train,
// evaluate and predict (internal to estimator/), as TF's MonitoredSession runs it
// (tensorflow/python/training/monitored_session.py: begin() when the session is made,
// after_create_session() from _CoordinatedSessionCreator, before_run/after_run around each run
// in _HookedSession, end() in _close_internal):
//   create(more)  once, after the first model_fn call (the variables exist then, restored):
//                 `more` (the spec's hooks) joins the list, every hook's begin(), then every
//                 hook's after_create_session(session);
//   run(...)      each step: every hook's before_run, the step's ops, their fetches resolved by
//                 name, every hook's after_run; says whether a hook asked to stop;
//   close()       every hook's end(session), when they began (nothing when no step ran).
// It owns the Session the hooks see and the list of hooks (the caller's, then the spec's).
// As in TF (MonitoredSession.__exit__ ends the hooks only when the loop ends normally or on
// OutOfRangeError/StopIteration, which here is the input's end: an empty batch), an exception
// from the input, model_fn, the ops or a hook leaves the loop without close(): no end().
#pragma once

#include <cstdint>
#include <functional>

#include "estimator/estimator_spec.h"
#include "estimator/hooks/session_run_hook.h"

namespace est::detail {

class HookedSession {
 public:
  HookedSession(Session session, Hooks hooks);

  Session& session() { return session_; }
  const Session& session() const { return session_; }
  const Hooks& hooks() const { return hooks_; }
  // Whether create() ran (the first step's model_fn call is behind).
  bool began() const { return began_; }

  // Appends `more`, then begin() of every hook, `after_begin` (training: the workers' input
  // positions for the start checkpoint), then after_create_session of every hook. Returns
  // whether after_create_session changed a variable (a digest of every variable before and
  // after): TF calls it before the first step's forward pass, so the caller then runs that
  // step's model_fn again.
  bool create(const Hooks& more, const std::function<void()>& after_begin = {});

  // One step on `spec` (its global step before the step is `step`): before_run of every hook,
  // `ops` (timed as the run phase of `timings`), `after_ops` (training: the input positions of a
  // save), the hooks' fetches resolved, after_run of every hook. Returns whether a hook asked
  // to stop.
  bool run(const EstimatorSpec& spec, int64_t step, StepTimings& timings,
           const std::function<void()>& ops, const std::function<void()>& after_ops = {});

  // end() of every hook, when they began.
  void close();

 private:
  Session session_;
  Hooks hooks_;
  bool began_ = false;
};

}  // namespace est::detail
