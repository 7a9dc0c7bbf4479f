// Estimator::export_saved_model and the raw serving input receiver: the PREDICT model_fn traced
// into ONNX (export/), in TensorFlow's timestamped export layout. Followed: tensorflow/
// estimator's estimator.py (export_saved_model, _export_all_saved_models) and export/export.py
// (build_raw_serving_input_receiver_fn, get_timestamped_export_dir).
//
// The model: a fresh store restored from the checkpoint, one model_fn call at batch 1 so that
// every variable exists with its saved value, then two traced calls at batch sizes 2 and 3 with
// different random inputs (export/onnx_export.h: the dims that differ are the dynamic ones).
// The directory is written under a temporary name and renamed, as TF does.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "estimator/estimator.h"
#include "estimator/loop_util.h"
#include "export/onnx_export.h"
#include "export/servable.h"
#include "export/trace.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

namespace fs = std::filesystem;

// A tensor of `spec` with `batch` rows of random values (floats in [0, 1), integers 0).
Tensor example_tensor(const TensorSpec& spec, int64_t batch, unsigned seed) {
  Shape shape = spec.shape;
  shape[0] = batch;
  if (!is_floating(spec.dtype)) return Tensor::zeros(shape, spec.dtype);
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(ops::num_elements(shape)));
  for (float& v : values) v = uniform(generator);
  Tensor t = Tensor::from_vector(values, shape);
  return spec.dtype == DType::kF32 ? t : t.to(Device::cpu()).clone();
}

nlohmann::json tensor_info(const std::string& onnx_name, DType dtype, const Shape& shape) {
  return {{"name", onnx_name}, {"dtype", serving::tf_dtype_name(dtype)}, {"tensor_shape", shape}};
}

// <base>/<seconds since the epoch by the config's clock>, after every existing export (two
// exports within a second, or a clock behind the newest): the newest export sorts last, and
// no export waits (TF waits for the next second).
fs::path timestamped_export_dir(const fs::path& base, double now) {
  int64_t timestamp = static_cast<int64_t>(now);
  if (fs::is_directory(base))
    for (const auto& entry : fs::directory_iterator(base)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("temp-", 0) == 0) name = name.substr(5);
      if (!name.empty() && name.size() <= 18 &&
          name.find_first_not_of("0123456789") == std::string::npos)
        timestamp = std::max<int64_t>(timestamp, std::stoll(name) + 1);
    }
  return base / std::to_string(timestamp);
}

}  // namespace

ServingInputReceiverFn build_raw_serving_input_receiver_fn(
    std::map<std::string, TensorSpec> features, std::optional<int64_t> default_batch_size) {
  for (auto& [name, spec] : features) {
    if (spec.shape.empty())
      throw InvalidArgumentError(fmt::format(
          "build_raw_serving_input_receiver_fn: feature '{}' is a scalar; a serving input "
          "needs a batch dimension first",
          name));
    spec.shape[0] = default_batch_size.value_or(-1);
  }
  return [features] { return ServingInputReceiver{.receiver_tensors = features}; };
}

std::string Estimator::export_saved_model(const std::string& export_dir_base,
                                          const ServingInputReceiverFn& serving_input_receiver_fn,
                                          const std::map<std::string, std::string>& assets_extra,
                                          const std::optional<std::string>& checkpoint_path) const {
  if (!serving_input_receiver_fn)
    throw InvalidArgumentError("export_saved_model: serving_input_receiver_fn is empty");
  const std::string source = checkpoint_path ? *checkpoint_path : latest_checkpoint().value_or("");
  if (source.empty())
    throw NotFoundError(
        fmt::format("export_saved_model: couldn't find trained model at {}; train first or pass "
                    "checkpoint_path",
                    model_dir()));
  const ServingInputReceiver receiver = serving_input_receiver_fn();
  if (receiver.receiver_tensors.empty())
    throw InvalidArgumentError("export_saved_model: the serving input receiver has no tensors");

  nn::VariableStore store;
  EstimatorContext ctx(store, ModeKeys::kPredict, seed_, params_, config_);
  std::optional<detail::Restored> restored = detail::restore_checkpoint(source, {&store});
  if (!restored)
    throw NotFoundError(fmt::format("export_saved_model: no checkpoint at {}", source));
  ops::NoGradGuard no_grad;
  EstimatorSpec last_spec({.mode = ModeKeys::kPredict, .predictions = {{"", Tensor::scalar(0)}}});
  auto predict = [&](const serving::NamedTensors& inputs) {
    Features features = receiver.features_fn ? receiver.features_fn(inputs) : inputs;
    last_spec =
        detail::call_model_fn(model_fn_, ctx, data::Element(features), ModeKeys::kPredict, false);
    serving::NamedTensors outputs(last_spec.predictions.begin(), last_spec.predictions.end());
    for (const auto& [key, tensor] : last_spec.export_outputs)
      outputs["export_outputs/" + key] = tensor;
    return outputs;
  };
  auto inputs_at = [&](int64_t batch, unsigned seed) {
    serving::NamedTensors inputs;
    for (const auto& [name, spec] : receiver.receiver_tensors)
      inputs[name] = example_tensor(spec, batch, seed++);
    return inputs;
  };
  predict(inputs_at(1, 1));  // creates the variables with their saved values
  detail::check_restored(*restored, store);
  std::vector<std::pair<std::string, Tensor>> names;
  for (const nn::Variable& variable : store.variables())
    names.emplace_back(variable.name, variable.value);
  serving::Trace first = serving::trace(predict, inputs_at(2, 11), names);
  serving::Trace second = serving::trace(predict, inputs_at(3, 21), names);
  const std::string model = serving::to_onnx(first, second, "serving_default");

  // Signatures: serving_default (the predictions, or export_outputs["serving_default"]) and
  // one per export_outputs entry, each output under TF's PredictOutput key "output".
  nlohmann::json inputs = nlohmann::json::object();
  for (const auto& [name, spec] : receiver.receiver_tensors)
    inputs[name] = tensor_info(name, spec.dtype, spec.shape);
  auto output_info = [&](const std::string& onnx_name) {
    const serving::TracedValue& value = first.values[first.outputs.at(onnx_name)];
    Shape shape = value.shape;
    const Shape& other = second.values[second.outputs.at(onnx_name)].shape;
    for (size_t axis = 0; axis < shape.size(); ++axis)
      if (shape[axis] != other[axis]) shape[axis] = -1;
    return tensor_info(onnx_name, value.dtype, shape);
  };
  nlohmann::json signatures;
  nlohmann::json default_outputs = nlohmann::json::object();
  for (const auto& [key, tensor] : last_spec.predictions) default_outputs[key] = output_info(key);
  signatures["serving_default"] = {{"method_name", "tensorflow/serving/predict"},
                                   {"inputs", inputs},
                                   {"outputs", default_outputs}};
  for (const auto& [key, tensor] : last_spec.export_outputs)
    signatures[key] = {{"method_name", "tensorflow/serving/predict"},
                       {"inputs", inputs},
                       {"outputs", {{"output", output_info("export_outputs/" + key)}}}};

  const fs::path final_dir = timestamped_export_dir(export_dir_base, config_.now());
  const fs::path temp_dir = final_dir.parent_path() / ("temp-" + final_dir.filename().string());
  fs::create_directories(temp_dir / "assets");
  std::ofstream(temp_dir / "model.onnx", std::ios::binary) << model;
  std::ofstream(temp_dir / "signatures.json") << signatures.dump(2) << "\n";
  for (const auto& [destination, source_path] : assets_extra) {
    const fs::path target = temp_dir / "assets.extra" / destination;
    fs::create_directories(target.parent_path());
    fs::copy_file(source_path, target, fs::copy_options::overwrite_existing);
  }
  fs::rename(temp_dir, final_dir);
  log::info("SavedModel written to: {}", final_dir.string());
  return final_dir.string();
}

}  // namespace est
