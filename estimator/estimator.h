// Estimator: trains, evaluates and predicts with a model_fn (tf.estimator.Estimator).
//
// Each train/evaluate/predict call builds its own VariableStore, restores the latest
// checkpoint of model_dir into it (staged: variables take their saved values when model_fn
// creates them), and loops over a session (training_session.h, evaluation_session.h,
// prediction_session.h; the hooks' life cycle is hooked_session.h). What happens around the
// step (stopping, logging, checkpoints, summaries, NaN checks) is done by hooks. Split over
// estimator.cpp (construction, checkpoint queries) and estimator_{train,evaluate,predict}.cpp.
//
// This header is also the folder's umbrella: after the class it includes the hooks,
// exporters, train_and_evaluate and the summary files, so `#include "estimator/estimator.h"`
// gives the whole public API.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/warm_start.h"
#include "estimator/estimator_spec.h"
#include "estimator/hooks/checkpoint_saver_hook.h"
#include "estimator/hooks/session_run_hook.h"
#include "estimator/params.h"
#include "estimator/run_config.h"
#include "estimator/serving_input.h"
#include "estimator/specs.h"

namespace est {

using Metrics = std::map<std::string, double>;  // metric name -> value, plus loss, global_step

// The keyword arguments of Estimator::train, evaluate and predict, by TensorFlow's names and in
// its order (estimator.py), so a call reads like TF's: train(input_fn, {.max_steps = 1000}).
// Every Estimator, the canned ones included, takes these.
struct TrainOptions {
  Hooks hooks;
  // `steps` more steps (incremental) or up to global step `max_steps` (absolute): at most one of
  // them, each positive; neither: until the input ends or a hook requests a stop.
  std::optional<int64_t> steps;
  std::optional<int64_t> max_steps;
  Listeners saving_listeners;  // called around each checkpoint the chief saves
};

struct EvaluateOptions {
  std::optional<int64_t> steps;  // batches to evaluate (positive); unset: until the input ends
  Hooks hooks;
  std::optional<std::string> checkpoint_path;  // unset: the latest checkpoint of model_dir
  std::string name;                            // summaries go to eval_<name> when set (no '/')
};

struct PredictOptions {
  std::vector<std::string> predict_keys;  // empty: every prediction of the spec
  Hooks hooks;
  std::optional<std::string> checkpoint_path;  // unset: the latest checkpoint of model_dir
  // true: one map per example (each tensor's row); false: one map per batch, as model_fn made it.
  bool yield_single_examples = true;
};

class Estimator {
 public:
  // model_dir, when given, must agree with config.model_dir unless that is empty. An empty
  // model_dir everywhere makes a fresh temporary directory (logged).
  Estimator(ModelFn model_fn, RunConfig config = {}, Params params = {},
            std::optional<checkpoint::WarmStartSettings> warm_start_from = {});
  Estimator(ModelFn model_fn, const std::string& model_dir, RunConfig config = {},
            Params params = {}, std::optional<checkpoint::WarmStartSettings> warm_start_from = {});

  // Trains until `steps` more steps (incremental), global step `max_steps` (absolute), the end
  // of the input, or a hook's request_stop. Returns *this, as TF does, for chaining.
  Estimator& train(const InputFn& input_fn, const TrainOptions& options = {});

  // Evaluates the latest checkpoint (or `checkpoint_path`) on `steps` batches, or until the
  // input ends: each eval_metric_ops entry's result(), plus "loss" (mean over batches) and
  // "global_step". Summaries go to eval_dir(name).
  Metrics evaluate(const InputFn& input_fn, const EvaluateOptions& options = {});

  // One prediction map per example (each prediction tensor split along its first dimension), or
  // per batch without yield_single_examples. predict_keys selects some of the spec's
  // predictions (NotFoundError naming an unknown key).
  std::vector<Predictions> predict(const InputFn& input_fn, const PredictOptions& options = {});
  // The streaming form: `consume` is called for each example (or batch) in order; returning
  // false stops.
  void predict(const InputFn& input_fn, const std::function<bool(Predictions)>& consume,
               const PredictOptions& options = {});

  // Writes the PREDICT model_fn of the latest checkpoint (or `checkpoint_path`) for serving, in
  // TF's layout: <export_dir_base>/<timestamp>/ with model.onnx (estimator_export.cpp says how
  // it is traced), signatures.json (serving_default and every export_outputs entry), assets/,
  // and assets_extra's files (destination path -> source path) under assets.extra/; `as_text`
  // also writes model.pbtxt, the model in protobuf text format. Returns the directory.
  // NotFoundError when there is no checkpoint; UnimplementedError naming an op the export
  // cannot express.
  std::string export_saved_model(const std::string& export_dir_base,
                                 const ServingInputReceiverFn& serving_input_receiver_fn,
                                 const std::map<std::string, std::string>& assets_extra = {},
                                 bool as_text = false,
                                 const std::optional<std::string>& checkpoint_path = {}) const;

  std::optional<std::string> latest_checkpoint() const;
  // From the latest checkpoint: NotFoundError when there is none yet.
  std::vector<std::string> get_variable_names() const;
  Tensor get_variable_value(const std::string& name) const;

  const std::string& model_dir() const { return config_.model_dir; }
  const RunConfig& config() const { return config_; }
  const Params& params() const { return params_; }
  // The model_fn this Estimator calls (tf.estimator.Estimator.model_fn).
  const ModelFn& model_fn() const { return model_fn_; }
  // model_dir/eval, or model_dir/eval_<name>.
  std::string eval_dir(const std::string& name = {}) const;

 private:
  // train() without the error report to the other workers.
  Estimator& train_loop(const InputFn& input_fn, const TrainOptions& options);

  ModelFn model_fn_;
  RunConfig config_;
  Params params_;
  std::optional<checkpoint::WarmStartSettings> warm_start_from_;
  uint64_t seed_;
};

}  // namespace est

// The rest of the folder's public API (each of these may include this header: the class above
// is complete by then).
#include "estimator/event_reader.h"
#include "estimator/exporter.h"
#include "estimator/hooks/basic_hooks.h"
#include "estimator/hooks/early_stopping.h"
#include "estimator/hooks/profiler_hook.h"
#include "estimator/summary_ops.h"
#include "estimator/summary_writer.h"
#include "estimator/train_and_evaluate.h"
