// Pieces the train, evaluate and predict loops share (internal to estimator/): making the
// dataset, calling model_fn with its checks and log lines, restoring a checkpoint into a
// fresh store, resolving the hooks' fetches, and the hook calls themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/bundle.h"
#include "data/dataset.h"
#include "estimator/estimator_spec.h"
#include "estimator/hooks/session_run_hook.h"
#include "estimator/params.h"
#include "estimator/specs.h"

namespace est::detail {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// input_fn(mode, input_context) with its failures turned into clear errors (input_context is
// null without a distribution strategy).
data::Dataset make_dataset(const InputFn& input_fn, ModeKeys mode,
                           const InputContext* input_context = nullptr);

// One model_fn call: begin_call, the active-context guard, the spec checks (mode, fields).
// `log_calls` adds "Calling model_fn." / "Done calling model_fn.".
EstimatorSpec call_model_fn(const ModelFn& model_fn, EstimatorContext& ctx,
                            const data::Element& element, ModeKeys mode, bool log_calls);

// A checkpoint restored into an empty store (values staged until model_fn creates them).
struct Restored {
  std::string path;
  int64_t global_step = 0;
  std::vector<std::string> names;  // every tensor of the checkpoint
  std::vector<checkpoint::Blob> blobs;
  const checkpoint::Blob* blob(const std::string& name) const;
};
// Restores the newest readable checkpoint of `path_or_dir` (logs "Restoring parameters from
// ...") into each of `stores` (the replicas' copies: each gets its own tensors, read from the
// same file); nullopt when there is no checkpoint.
std::optional<Restored> restore_checkpoint(const std::string& path_or_dir,
                                           const std::vector<nn::VariableStore*>& stores);
// After the first model_fn call: each variable the model created must have come from the
// checkpoint (NotFoundError naming it and the checkpoint otherwise).
void check_restored(const Restored& restored, const nn::VariableStore& store);

// Scaffold.init_fn on `session` (the first replica's variables), then every variable copied to
// the other replicas' stores (`stores`, the first being the session's), so they stay identical.
void run_init_fn(const std::function<void(Session&)>& init_fn, Session& session,
                 const std::vector<nn::VariableStore*>& stores);

// The hooks' fetches after a step, by name: "loss", "global_step" (its value before the
// step), prediction keys, variables; hook-supplied tensors as given.
SessionRunValues resolve_fetches(const std::vector<SessionRunArgs>& args, const EstimatorSpec& spec,
                                 const Session& session, int64_t step_before, int64_t step_after);

// The hook life cycle over a list.
void begin_hooks(const Hooks& hooks);
// after_create_session of every hook. Returns whether they changed a value of session.store()
// (a digest of every variable before and after): TF calls them before the first step's forward
// pass (monitored_session.py), so the caller then runs that step's model_fn again.
bool after_create_session(const Hooks& hooks, Session& session);
std::vector<SessionRunArgs> before_run(const Hooks& hooks, SessionRunContext& run_context);
void after_run(const Hooks& hooks, SessionRunContext& run_context, const SessionRunValues& values);
void end_hooks(const Hooks& hooks, Session& session);
void check_hooks(const Hooks& hooks, const char* where);

// "2026-11-22T11:30:00" (UTC), for "Starting evaluation at ...".
std::string now_iso8601();

}  // namespace est::detail
