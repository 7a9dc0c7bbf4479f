// Pieces the train, evaluate and predict sessions share (internal to estimator/): making the
// dataset, calling model_fn with its checks and log lines, restoring a checkpoint into a
// fresh store, and checking the hooks passed. The hooks' life cycle is estimator/hooked_session.h.
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

// What every session (training, evaluation, prediction) runs: the Estimator's model_fn, the
// caller's input_fn, and the Estimator's config, seed and params.
struct SessionModel {
  ModelFn model_fn;
  InputFn input_fn;
  const RunConfig* config = nullptr;
  uint64_t seed = 0;
  const Params* params = nullptr;
};

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
// The checkpoint evaluate and predict (`verb`) read: `checkpoint_path`, else the latest of
// `model_dir`, restored into `stores`. NotFoundError when checkpoint_path names none; without
// any, TF's warning (the variables keep their initial values) and nullopt.
std::optional<Restored> restore_for_inference(const char* verb,
                                              const std::optional<std::string>& checkpoint_path,
                                              const std::string& model_dir,
                                              const std::vector<nn::VariableStore*>& stores);
// After the first model_fn call: each variable the model created must have come from the
// checkpoint (NotFoundError naming it and the checkpoint otherwise).
void check_restored(const Restored& restored, const nn::VariableStore& store);

// Scaffold.init_fn on `session` (the first replica's variables), then every variable copied to
// the other replicas' stores (`stores`, the first being the session's), so they stay identical.
void run_init_fn(const std::function<void(Session&)>& init_fn, Session& session,
                 const std::vector<nn::VariableStore*>& stores);

// The hooks a caller passed: InvalidArgumentError naming a null one (`where`: "train", ...).
void check_hooks(const Hooks& hooks, const char* where);

// "2026-11-22T11:30:00" (UTC), for "Starting evaluation at ...".
std::string now_iso8601();

}  // namespace est::detail
