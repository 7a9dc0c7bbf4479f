// SessionRunHook: TensorFlow's hook life cycle around the Estimator's loops.
//
//   begin()                       once, before the loop (no variables may exist yet)
//   after_create_session(session) once, after the first model_fn call created the variables
//                                 and the checkpoint (if any) was restored
//   will_save_after(step)         multi-worker chief only, each step before its input is read:
//                                 whether the hook saves a checkpoint after that step
//   before_run(run_context)       each step, after model_fn: returns the tensors it wants
//   after_run(run_context, values)each step, after the train op; may request_stop()
//   end(session)                  once, when the loop ends normally (not on an exception)
//
// Everything that decides when training stops, logs or saves is a hook, so the loops hold no
// such branches. There is no graph: a hook names what it wants (SessionRunArgs: "loss",
// "global_step", a prediction key, a variable name) or hands over tensors itself, and gets
// them back in SessionRunValues after the step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/bundle.h"
#include "estimator/mode_keys.h"
#include "estimator/run_config.h"
#include "nn/variable_store.h"
#include "ops/tensor.h"

namespace est {

struct EstimatorSpec;

// What hooks see of a running loop: the variables, the mode, the directory, the config, and
// (in training) the checkpoint bundle of the current state.
class Session {
 public:
  using BundleFn = std::function<checkpoint::TensorBundle()>;

  Session(nn::VariableStore& store, ModeKeys mode, std::string model_dir, const RunConfig& config,
          BundleFn bundle = {})
      : store_(&store),
        mode_(mode),
        model_dir_(std::move(model_dir)),
        config_(&config),
        bundle_(std::move(bundle)) {}

  nn::VariableStore& store() const { return *store_; }
  ModeKeys mode() const { return mode_; }
  const std::string& model_dir() const { return model_dir_; }
  const RunConfig& config() const { return *config_; }
  int64_t global_step() const { return nn::read_global_step(*store_); }
  // Variables, slots, global step, RNG states and the input position, as handles (the
  // CheckpointManager snapshots them). FailedPreconditionError outside training.
  checkpoint::TensorBundle checkpoint_bundle() const;
  // A variable's current value by name, or "global_step"; NotFoundError naming it otherwise.
  Tensor fetch_variable(const std::string& name) const;
  // Whether the workers agree before each step on whether a checkpoint is saved after it (the
  // chief of a multi-worker job: every worker's input position is gathered for that save). A
  // hook that saves then announces its saves in will_save_after and saves only then.
  bool saves_agreed_before_steps() const { return saves_agreed_before_steps_; }
  void set_saves_agreed_before_steps(bool agreed) { saves_agreed_before_steps_ = agreed; }

 private:
  nn::VariableStore* store_;
  ModeKeys mode_;
  std::string model_dir_;
  const RunConfig* config_;
  BundleFn bundle_;
  bool saves_agreed_before_steps_ = false;
};

// When the phases of one step began and ended (steady clock, seconds), for the ProfilerHook.
struct StepTimings {
  double input_begin = 0;     // asking the iterator for the next element
  double model_fn_begin = 0;  // element in hand
  double model_fn_end = 0;    // spec returned (forward pass done)
  double run_begin = 0;       // before_run hooks done; the train op starts
  double run_end = 0;         // backward + update done; after_run hooks start
};

struct SessionRunArgs {
  // Names to fetch: "loss", "global_step" (its value before this step), a key of the spec's
  // predictions, or a variable's full name (its value after the step).
  std::vector<std::string> fetches;
  // Tensors the hook supplies itself, returned under their keys.
  std::map<std::string, Tensor> tensors;
};

struct SessionRunValues {
  std::map<std::string, Tensor> results;  // by fetch name / tensor key
  int64_t global_step = 0;                // after the step (training: before + 1)
};

class SessionRunContext {
 public:
  SessionRunContext(Session& session, const EstimatorSpec& spec, int64_t global_step,
                    const StepTimings& timings)
      : session_(&session), spec_(&spec), global_step_(global_step), timings_(&timings) {}

  Session& session() const { return *session_; }
  const EstimatorSpec& spec() const { return *spec_; }  // this step's model_fn result
  int64_t global_step() const { return global_step_; }  // before the step
  const StepTimings& timings() const { return *timings_; }
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  Session* session_;
  const EstimatorSpec* spec_;
  int64_t global_step_;
  const StepTimings* timings_;
  bool stop_requested_ = false;
};

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  virtual void begin() {}
  virtual void after_create_session(Session& /*session*/) {}
  // Only when Session::saves_agreed_before_steps(): before the step that ends at global step
  // `step` reads its input, whether this hook will save a checkpoint in that step's after_run.
  virtual bool will_save_after(int64_t /*step*/) { return false; }
  virtual SessionRunArgs before_run(SessionRunContext& /*run_context*/) { return {}; }
  virtual void after_run(SessionRunContext& /*run_context*/,
                         const SessionRunValues& /*run_values*/) {}
  virtual void end(Session& /*session*/) {}
};

using Hooks = std::vector<std::shared_ptr<SessionRunHook>>;

namespace hooks {
using est::Hooks;
using est::Session;
using est::SessionRunArgs;
using est::SessionRunContext;
using est::SessionRunHook;
using est::SessionRunValues;
}  // namespace hooks

}  // namespace est
