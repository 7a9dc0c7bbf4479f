// keras.estimator.model_to_estimator, with checkpoint_format "saver"
// (tensorflow_estimator/python/estimator/keras_lib.py: _create_keras_model_fn,
// _convert_estimator_io_to_keras, _convert_keras_metrics_to_estimator, _save_first_checkpoint;
// model_to_estimator.h says what differs).
#include "keras/model_to_estimator.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "checkpoint/state_file.h"
#include "checkpoint/writer.h"
#include "nn/variable_store.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return "[" + out + "]";
}

// _convert_estimator_io_to_keras: the model's inputs in order, from a dict of features keyed by
// the Input names (extra keys allowed), or the one feature of a one-input model.
std::vector<Tensor> model_inputs(const Model& model, const Features& features) {
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

// _create_keras_model_fn's model_fn: the model's graph, its compiled loss and metrics.
ModelFn keras_model_fn(Model& model, Loss loss, nn::optim::Optimizer optimizer,
                       std::map<std::string, std::string> metric_keys) {
  return [&model, loss = std::move(loss), optimizer = std::move(optimizer),
          metric_keys = std::move(metric_keys)](const Features& features, const Tensor& labels,
                                                ModeKeys mode, ModelContext& ctx) {
    std::vector<Tensor> outputs = model.call(ctx, model_inputs(model, features));
    Predictions predictions;
    for (size_t i = 0; i < outputs.size(); ++i)
      predictions[model.outputs()[i].node->layer->name()] = outputs[i];
    if (mode == ModeKeys::kPredict) return EstimatorSpec::predict(std::move(predictions));
    if (outputs.size() != 1)
      throw UnimplementedError(fmt::format(
          "model_to_estimator: model \"{}\" has {} outputs; train and evaluate support one "
          "output for now (predict supports several)",
          model.name(), outputs.size()));
    if (!labels.defined())
      throw InvalidArgumentError(fmt::format(
          "model_to_estimator: model \"{}\": train and evaluate need labels: an input_fn "
          "whose dataset yields (features, labels)",
          model.name()));
    Tensor total_loss = loss.fn(labels, outputs[0]);
    MetricOps eval_metric_ops;
    {
      ops::NoGradGuard no_grad;
      const Tensor y_pred = outputs[0].detach();
      // Keras's loss metric: the mean over examples (each batch weighted by its size).
      eval_metric_ops["loss"] = nn::metrics::mean(
          total_loss.detach(), Tensor::scalar(static_cast<double>(y_pred.shape()[0])));
      for (const auto& [name, key] : metric_keys)
        eval_metric_ops[key] = get_metric(name, labels.shape(), y_pred.shape()).fn(labels, y_pred);
    }
    EstimatorSpec spec =
        mode == ModeKeys::kTrain
            ? EstimatorSpec::train(
                  total_loss,
                  optimizer.minimize(total_loss, ctx, {.loss_reduction = loss.reduction}))
            : EstimatorSpec::eval(total_loss, {});
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

// _save_first_checkpoint, as the estimator's own first checkpoint: the model's current weights
// (trainable or not) and global_step 0, unless model_dir has a checkpoint to continue from.
void save_first_checkpoint(Model& model, const std::string& model_dir) {
  if (checkpoint::latest_checkpoint(model_dir)) return;
  std::vector<Tensor> values = model.get_weights();
  auto specs = model.weights();
  checkpoint::TensorBundle bundle;
  for (size_t i = 0; i < specs.size(); ++i)
    bundle.add_variable(specs[i].first, values[i], specs[i].second.trainable);
  bundle.add_variable(std::string(nn::kGlobalStepName), Tensor::zeros({}, ops::DType::kI64), false);
  fs::create_directories(model_dir);
  std::string file = checkpoint::checkpoint_file_name("model.ckpt", 0);
  checkpoint::save((fs::path(model_dir) / file).string(), bundle);
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  checkpoint::write_checkpoint_state(model_dir, {.model_checkpoint_path = file,
                                                 .all_model_checkpoint_paths = {file},
                                                 .all_model_checkpoint_timestamps = {now}});
}

}  // namespace

Estimator model_to_estimator(Model& model, ModelToEstimatorOptions options) {
  if (options.checkpoint_format == "checkpoint")
    throw UnimplementedError(
        "model_to_estimator: checkpoint_format \"checkpoint\" (object-based names) is not "
        "supported; pass .checkpoint_format = \"saver\" (variables named `dense/kernel`)");
  if (options.checkpoint_format != "saver")
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
  auto keys = metric_keys(compiled->metrics, options.metric_names_map);
  Loss loss = std::holds_alternative<std::string>(compiled->loss)
                  ? get_loss(std::get<std::string>(compiled->loss))
                  : std::get<Loss>(compiled->loss);
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
  if (config.is_chief) save_first_checkpoint(model, config.model_dir);
  return Estimator(keras_model_fn(model, std::move(loss), std::move(optimizer), std::move(keys)),
                   config);
}

}  // namespace est::keras
