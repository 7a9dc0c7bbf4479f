// keras.estimator.model_to_estimator
// (tensorflow_estimator/python/estimator/keras_lib.py: _create_keras_model_fn,
// _convert_estimator_io_to_keras, _convert_keras_metrics_to_estimator, _save_first_checkpoint;
// model_to_estimator.h says what differs).
#include "keras/model_to_estimator.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "checkpoint/source.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_resume.h"
#include "checkpoint/writer.h"
#include "keras/compile_utils.h"
#include "keras/object_checkpoint.h"
#include "nn/variable_store.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

namespace fs = std::filesystem;

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return "[" + out + "]";
}

// _convert_estimator_io_to_keras: the model's inputs in order, from a dict of features keyed by
// the Input names (extra keys allowed), or the one feature of a one-input model.
std::vector<Tensor> model_inputs(const Model& model, const Features& batch) {
  Features features;  // x alone: without the y that keras::pack_x_y keys by output
  bool tuple = false;
  for (const auto& [key, value] : batch)
    if (is_x_feature(key)) {
      features.emplace(key, value);
      tuple = tuple || key.starts_with('#');
    }
  if (tuple) return unpack_x(features, model.input_names(), model.name());
  const auto& inputs = model.inputs();
  if (inputs.size() == 1 && features.size() == 1) return {features.begin()->second};
  std::vector<Tensor> out;
  std::set<std::string> missed, given;
  for (const auto& [key, value] : features) given.insert(key);
  for (const KerasTensor& input : inputs) {
    auto it = features.find(input.node->layer->name());
    if (it == features.end())
      missed.insert(input.node->layer->name());
    else
      out.push_back(it->second);
  }
  if (!missed.empty())
    throw InvalidArgumentError(fmt::format(
        "The dictionary passed into features does not cover requested inputs keys defined in "
        "the keras model \"{}\". features keys: {}; missed keys: {}; key the input_fn's "
        "features by the model's Input names",
        model.name(), joined(given), joined(missed)));
  return out;
}

// _create_keras_model_fn's model_fn: the model's graph, its compiled total loss (the weighted sum
// over the outputs) and metrics; labels as _convert_estimator_io_to_keras takes them: one tensor,
// or y keyed by output name or in output order (keras::pack_x_y).
ModelFn keras_model_fn(Model& model, std::shared_ptr<const CompiledLossesAndMetrics> compiled,
                       nn::optim::Optimizer optimizer,
                       std::map<std::string, std::string> metric_keys) {
  return [&model, compiled = std::move(compiled), optimizer = std::move(optimizer),
          metric_keys = std::move(metric_keys)](const Features& features, const Tensor& labels,
                                                ModeKeys mode, ModelContext& ctx) {
    std::vector<Tensor> outputs = model.call(ctx, model_inputs(model, features));
    const std::vector<std::string> names = model.output_names();
    Predictions predictions;
    for (size_t i = 0; i < outputs.size(); ++i) predictions[names[i]] = outputs[i];
    if (mode == ModeKeys::kPredict) return EstimatorSpec::predict(std::move(predictions));
    auto step = (*compiled)(unpack_y(features, labels, names, model.name()), outputs,
                            model.regularization_losses(ctx));
    // Keras's loss metric (the mean over examples, each batch weighted by its size) and the
    // compiled metrics under their keys.
    MetricOps eval_metric_ops{{"loss", step.ops.at("loss")}};
    for (const auto& [name, key] : metric_keys) eval_metric_ops[key] = step.ops.at(name);
    EstimatorSpec spec =
        mode == ModeKeys::kTrain
            ? EstimatorSpec::train(
                  step.loss, optimizer.minimize(step.loss, ctx, {.loss_reduction = step.reduction}))
            : EstimatorSpec::eval(step.loss, {});
    spec.eval_metric_ops = std::move(eval_metric_ops);
    spec.predictions = std::move(predictions);
    return spec;
  };
}

// _convert_keras_metrics_to_estimator's names: each compiled metric's own, or the map's.
std::map<std::string, std::string> metric_keys(const std::vector<std::string>& metrics,
                                               const std::map<std::string, std::string>& map) {
  std::map<std::string, std::string> keys;
  for (const auto& name : metrics) keys[name] = name;
  if (map.empty()) return keys;
  std::set<std::string> unknown, extra;
  for (const auto& name : metrics)
    if (!map.count(name)) unknown.insert(name);
  for (const auto& [name, key] : map)
    if (!keys.count(name)) extra.insert(name);
  if (!unknown.empty())
    throw InvalidArgumentError(
        fmt::format("Invalid `metric_names_map`. The following keras model metric names:{} do "
                    "not exist in the `metric_names_map` dictionary",
                    joined(unknown)));
  if (!extra.empty()) {
    std::set<std::string> expected(metrics.begin(), metrics.end());
    throw InvalidArgumentError(
        fmt::format("Invalid `metric_names_map`. There are unexpected keys in the "
                    "`metric_names_map` dictionary. Expected keys: {}, Received: {}",
                    joined(expected), joined(extra)));
  }
  for (auto& [name, key] : keys) key = map.at(name);
  return keys;
}

// _save_first_checkpoint, as the estimator's own first checkpoint: `values` (the model's
// weights, trainable or not) and global_step 0, unless model_dir has a checkpoint to continue
// from.
void save_first_checkpoint(Model& model, const std::string& model_dir,
                           const std::vector<Tensor>& values) {
  if (checkpoint::latest_checkpoint(model_dir)) return;
  auto specs = model.weights();
  checkpoint::TensorBundle bundle;
  for (size_t i = 0; i < specs.size(); ++i)
    bundle.add_variable(specs[i].first, values[i], specs[i].second.trainable);
  bundle.add_variable(std::string(nn::kGlobalStepName), Tensor::zeros({}, ops::DType::kI64), false);
  fs::create_directories(model_dir);
  std::string file = checkpoint::checkpoint_file_name("model.ckpt", 0);
  checkpoint::save((fs::path(model_dir) / file).string(), bundle);
  checkpoint::write_checkpoint_state(model_dir, {.model_checkpoint_path = file,
                                                 .all_model_checkpoint_paths = {file},
                                                 .all_model_checkpoint_timestamps = {now()}});
}

// _save_first_checkpoint with save_object_ckpt: the model as model.save_weights writes it, with
// the estimator's global step tracked, at model_dir/keras/keras_model.ckpt, unless keras/
// already names a TensorFlow checkpoint (then that one is the start, as in TF). Returns the
// prefix the estimator starts from.
std::string save_object_checkpoint(Model& model, const std::string& model_dir) {
  std::string keras_dir = (fs::path(model_dir) / "keras").string();
  if (auto state = checkpoint::read_checkpoint_state(keras_dir)) {
    std::string path = checkpoint::resolve_in_directory(keras_dir, state->model_checkpoint_path);
    if (checkpoint::is_tf_prefix(path)) return path;
  }
  std::string prefix = (fs::path(keras_dir) / "keras_model.ckpt").string();
  write_object_checkpoint(prefix, model,
                          {.weights = model.get_weights(),
                           .learning_rate = model.learning_rate(),
                           .estimator_global_step = 0});
  checkpoint::write_checkpoint_state(keras_dir, {.model_checkpoint_path = "keras_model.ckpt",
                                                 .all_model_checkpoint_paths = {"keras_model.ckpt"},
                                                 .all_model_checkpoint_timestamps = {now()}});
  return prefix;
}

// The model's weights from an object-based checkpoint, by their names through its object graph
// (warm_starting_util.py _get_object_checkpoint_renames): every weight, as est starts every one.
std::vector<Tensor> object_checkpoint_weights(const Model& model, const std::string& prefix) {
  auto source = checkpoint::open_checkpoint(prefix);
  std::set<std::string> missing;
  std::vector<Tensor> values;
  for (const auto& [name, spec] : model.weights()) {
    if (!source->contains(name)) {
      missing.insert(name);
      continue;
    }
    Tensor value = source->read(name);
    if (value.shape() != spec.shape)
      throw InvalidArgumentError(fmt::format(
          "model_to_estimator: {} holds {} with shape {}, but model \"{}\" has it with shape "
          "{}; remove {} or convert a model of the same layers",
          prefix, name, ops::shape_str(value.shape()), model.name(), ops::shape_str(spec.shape),
          prefix));
    values.push_back(value);
  }
  if (!missing.empty())
    throw InvalidArgumentError(fmt::format(
        "Attempting to warm-start from an object-based checkpoint ({}), but found that the "
        "checkpoint did not contain values for all variables. The following variables were "
        "missing: {}; name the layers as the checkpoint's model named them",
        prefix, joined(missing)));
  return values;
}

}  // namespace

Estimator model_to_estimator(Model& model, ModelToEstimatorOptions options) {
  if (options.checkpoint_format != "checkpoint" && options.checkpoint_format != "saver")
    throw InvalidArgumentError(
        fmt::format("Checkpoint format must be one of \"checkpoint\" or \"saver\". Got {}",
                    options.checkpoint_format));
  const auto& compiled = model.compile_options();
  if (!compiled || !model.optimizer())
    throw FailedPreconditionError(fmt::format(
        "The given keras model \"{}\" has not been compiled yet. Please compile the model with "
        "`model.compile()` before calling `model_to_estimator()`.",
        model.name()));
  if (!model.built())
    throw FailedPreconditionError(fmt::format(
        "model_to_estimator: model \"{}\" has no weights yet; give it an Input/InputLayer, "
        "call build(shape), or fit it first",
        model.name()));
  auto losses_and_metrics =
      std::make_shared<CompiledLossesAndMetrics>(*compiled, model.output_names(), model.name());
  auto keys = metric_keys(losses_and_metrics->metric_names(), options.metric_names_map);
  // The optimizer as configured now: a constant learning rate is the model's current one.
  nn::optim::Optimizer optimizer = model.optimizer()->optimizer;
  const auto* given = std::get_if<Optimizer>(&compiled->optimizer);
  if (!given || given->optimizer.learning_rate().is_constant())
    optimizer = optimizer.with_learning_rate(model.learning_rate());

  RunConfig config = options.config;
  if (!options.model_dir.empty()) {
    if (!config.model_dir.empty() && config.model_dir != options.model_dir)
      log::warning(
          "model_dir are set both in constructor and RunConfig, but with different values. In "
          "this case, the model_dir in constructor ({}) is used.",
          options.model_dir);
    config.model_dir = options.model_dir;
  }
  if (config.model_dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "est_keras_estimator_XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      throw InternalError(fmt::format("model_to_estimator: cannot create {}", pattern));
    config.model_dir = pattern;
    log::info("Using temporary folder as model directory: {}", pattern);
  }
  if (config.is_chief) {
    if (options.checkpoint_format == "checkpoint")
      save_first_checkpoint(
          model, config.model_dir,
          object_checkpoint_weights(model, save_object_checkpoint(model, config.model_dir)));
    else
      save_first_checkpoint(model, config.model_dir, model.get_weights());
  }
  return Estimator(
      keras_model_fn(model, std::move(losses_and_metrics), std::move(optimizer), std::move(keys)),
      config);
}

}  // namespace est::keras
