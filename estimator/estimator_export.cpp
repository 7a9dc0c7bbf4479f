// Estimator::export_saved_model and the raw and parsing serving input receivers: the PREDICT
// model_fn traced into ONNX (export/), in TensorFlow's timestamped export layout. Followed:
// tensorflow/estimator's estimator.py (export_saved_model, _export_all_saved_models),
// export/export.py (build_raw_serving_input_receiver_fn, build_parsing_serving_input_receiver_fn,
// get_timestamped_export_dir) and export_lib.py / export_output.py (signature defs).
//
// The model: a fresh store restored from the checkpoint, one model_fn call at batch 1 so that
// every variable exists with its saved value, then two traced calls at batch sizes 2 and 3 with
// different random inputs (export/onnx_export.h: the dims that differ are the dynamic ones).
// The directory is written under a temporary name and renamed, as TF does. A parsing receiver
// is exported as a pre-processing step (estimator/serving_input.h), and so are the feature
// columns' lookups (export/lookup_step.h: every signature lists them; a vocabulary file is
// copied into assets/, as TF's assets); signature_defs follows TF's rules for the default
// signature and for classify and regress signatures.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "estimator/estimator.h"
#include "estimator/loop_util.h"
#include "export/onnx_export.h"
#include "export/parse_example_step.h"
#include "export/servable.h"
#include "export/trace.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

namespace fs = std::filesystem;

// A tensor of `spec` with `batch` rows of random values (floats in [0, 1), integers 0,
// strings empty).
Tensor example_tensor(const TensorSpec& spec, int64_t batch, unsigned seed) {
  Shape shape = spec.shape;
  shape[0] = batch;
  if (spec.dtype == DType::kString)
    return data::string_tensor(std::vector<std::string>(ops::num_elements(shape)), shape);
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

// The ONNX output of export_outputs[signature]'s output `key`.
std::string export_output_name(const std::string& signature, const std::string& key) {
  return "export_outputs/" + signature + "/" + key;
}

// TF's signature defs (export_lib.build_all_signature_defs, export_output.py): serving_default
// is the predictions when export_outputs is empty, else the single export output, else the one
// named serving_default. Classification and regression signatures take one string tensor (the
// serialized examples) under the key "inputs": with any other receiver (a raw receiver of
// several features, or of one that is not a string) TF's as_signature_def refuses them and the
// export leaves them out with a warning, serving_default included when it is one of them (the
// canned heads': then the export has no default signature, and TF warns of that too).
nlohmann::json signature_defs(
    const EstimatorSpec& spec, const std::map<std::string, TensorSpec>& receiver_tensors,
    const std::optional<serving::ParseExampleStep>& parsing,
    const std::vector<serving::LookupStep>& lookups,
    const std::function<nlohmann::json(const std::string&)>& output_info) {
  constexpr const char* kDefault = "serving_default";
  std::map<std::string, ExportOutput> export_outputs = spec.export_outputs;
  std::map<std::string, std::string> onnx_names;  // "<signature>/<key>" -> ONNX output
  for (const auto& [signature, output] : export_outputs)
    for (const auto& [key, tensor] : output.outputs())
      onnx_names[signature + "/" + key] = export_output_name(signature, key);
  if (export_outputs.empty()) {
    export_outputs.emplace(kDefault, PredictOutput{spec.predictions});
    for (const auto& [key, tensor] : spec.predictions)
      onnx_names[std::string(kDefault) + "/" + key] = key;
  } else if (export_outputs.size() == 1 && !export_outputs.count(kDefault)) {
    const auto [signature, output] = *export_outputs.begin();
    export_outputs.emplace(kDefault, output);
    for (const auto& [key, tensor] : output.outputs())
      onnx_names[std::string(kDefault) + "/" + key] = export_output_name(signature, key);
  } else if (!export_outputs.count(kDefault)) {
    throw InvalidArgumentError(
        "export_saved_model: several export_outputs were given, but none of them is named "
        "serving_default; name one of them \"serving_default\" to make it the default");
  }
  nlohmann::json receiver_inputs = nlohmann::json::object();
  for (const auto& [name, spec] : receiver_tensors)
    receiver_inputs[name] = tensor_info(name, spec.dtype, spec.shape);
  const bool takes_examples =
      receiver_tensors.size() == 1 && receiver_tensors.begin()->second.dtype == DType::kString;
  nlohmann::json signatures = nlohmann::json::object();
  for (const auto& [signature, output] : export_outputs) {
    nlohmann::json def = {{"method_name", output.method_name()}};
    std::optional<serving::ParseExampleStep> step = parsing;
    if (output.method() == ExportOutput::Method::kPredict) {
      def["inputs"] = receiver_inputs;
    } else {
      if (!takes_examples) {
        log::warning(
            "export_saved_model: signature '{}' ({}) is omitted: classification and regression "
            "signatures take a single string tensor of serialized tf.Examples "
            "(build_parsing_serving_input_receiver_fn); the receiver has {} tensor(s)",
            signature, output.method_name(), receiver_tensors.size());
        continue;
      }
      def["inputs"] = {{"inputs", receiver_inputs.begin().value()}};
      if (step) step->input = "inputs";
    }
    nlohmann::json outputs = nlohmann::json::object();
    for (const auto& [key, tensor] : output.outputs())
      outputs[key] = output_info(onnx_names.at(signature + "/" + key));
    def["outputs"] = outputs;
    if (step) def["parse_example"] = serving::to_json(*step);
    for (const serving::LookupStep& lookup : lookups) def["lookups"].push_back(to_json(lookup));
    signatures[signature] = def;
  }
  std::string names;
  for (const auto& item : signatures.items()) names += (names.empty() ? "" : ", ") + item.key();
  if (signatures.empty())
    log::warning("export_saved_model: the export includes no signatures");
  else if (!signatures.contains(kDefault))
    log::warning(
        "export_saved_model: the export includes no default signature (serving_default was "
        "omitted); clients must name one of: {}",
        names);
  return signatures;
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

ServingInputReceiverFn build_parsing_serving_input_receiver_fn(
    data::FeatureSpecs feature_spec, std::optional<int64_t> default_batch_size) {
  if (feature_spec.empty())
    throw InvalidArgumentError("build_parsing_serving_input_receiver_fn: feature_spec is empty");
  const TensorSpec examples{.shape = {default_batch_size.value_or(-1)}, .dtype = DType::kString};
  return [feature_spec, examples] {
    return ServingInputReceiver{.receiver_tensors = {{"examples", examples}},
                                .features_fn =
                                    [feature_spec](const Features& receiver) {
                                      const Tensor& serialized = receiver.at("examples");
                                      return data::parse_example(
                                          serialized.to_vector<std::string>(), feature_spec);
                                    },
                                .feature_spec = feature_spec};
  };
}

std::string Estimator::export_saved_model(const std::string& export_dir_base,
                                          const ServingInputReceiverFn& serving_input_receiver_fn,
                                          const std::map<std::string, std::string>& assets_extra,
                                          bool as_text,
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
  // The graph's inputs: the receiver tensors, or for a parsing receiver the parsed features
  // (serving_input.h).
  std::optional<serving::ParseExampleStep> parsing;
  std::map<std::string, TensorSpec> graph_inputs = receiver.receiver_tensors;
  if (receiver.feature_spec) {
    if (receiver.receiver_tensors.size() != 1 ||
        receiver.receiver_tensors.begin()->second.dtype != DType::kString)
      throw InvalidArgumentError(
          "export_saved_model: a receiver with a feature_spec takes one string tensor of "
          "serialized tf.Examples");
    parsing =
        serving::ParseExampleStep{receiver.receiver_tensors.begin()->first, *receiver.feature_spec};
    serving::to_json(*parsing);  // refuses what the export cannot write, naming the feature
    graph_inputs.clear();
    for (const auto& [name, spec] : *receiver.feature_spec) {
      const auto& fixed = std::get<data::FixedLenFeature>(spec);
      Shape shape{-1};
      shape.insert(shape.end(), fixed.shape.begin(), fixed.shape.end());
      graph_inputs[name] = {shape, fixed.dtype};
    }
  }

  nn::VariableStore store;
  EstimatorContext ctx(store, ModeKeys::kPredict, seed_, params_, config_);
  std::optional<detail::Restored> restored = detail::restore_checkpoint(source, {&store});
  if (!restored)
    throw NotFoundError(fmt::format("export_saved_model: no checkpoint at {}", source));
  ops::NoGradGuard no_grad;
  EstimatorSpec last_spec({.mode = ModeKeys::kPredict, .predictions = {{"", Tensor::scalar(0)}}});
  auto predict = [&](const serving::NamedTensors& inputs) {
    Features features = inputs;
    if (receiver.features_fn && !parsing) features = receiver.features_fn(inputs);
    last_spec =
        detail::call_model_fn(model_fn_, ctx, data::Element(features), ModeKeys::kPredict, false);
    serving::NamedTensors outputs(last_spec.predictions.begin(), last_spec.predictions.end());
    for (const auto& [signature, output] : last_spec.export_outputs)
      for (const auto& [key, tensor] : output.outputs())
        outputs[export_output_name(signature, key)] = tensor;
    return outputs;
  };
  auto inputs_at = [&](int64_t batch, unsigned seed) {
    serving::NamedTensors inputs;
    for (const auto& [name, spec] : graph_inputs)
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
  std::vector<serving::LookupStep> lookups;
  const std::string model = serving::to_onnx(first, second, "serving_default", &lookups);
  // Vocabulary files are assets: copied into assets/ and named relative to the export.
  std::map<std::string, std::string> assets;  // assets/<name> -> the file it copies
  for (serving::LookupStep& step : lookups) {
    std::string& file = step.table.vocabulary_file;
    if (file.empty()) continue;
    const fs::path source = fs::absolute(file);
    std::string asset = "assets/" + source.filename().string();
    for (int n = 1; assets.count(asset) && assets.at(asset) != source.string(); ++n)
      asset = fmt::format("assets/{}_{}{}", source.stem().string(), n, source.extension().string());
    assets[asset] = source.string();
    file = asset;
  }
  auto output_info = [&](const std::string& onnx_name) {
    const serving::TracedValue& value = first.values[first.outputs.at(onnx_name)];
    Shape shape = value.shape;
    const Shape& other = second.values[second.outputs.at(onnx_name)].shape;
    for (size_t axis = 0; axis < shape.size(); ++axis)
      if (shape[axis] != other[axis]) shape[axis] = -1;
    return tensor_info(onnx_name, value.dtype, shape);
  };
  const nlohmann::json signatures =
      signature_defs(last_spec, receiver.receiver_tensors, parsing, lookups, output_info);

  const fs::path final_dir = timestamped_export_dir(export_dir_base, config_.now());
  const fs::path temp_dir = final_dir.parent_path() / ("temp-" + final_dir.filename().string());
  fs::create_directories(temp_dir / "assets");
  std::ofstream(temp_dir / "model.onnx", std::ios::binary) << model;
  if (as_text) std::ofstream(temp_dir / "model.pbtxt") << serving::onnx_text(model);
  std::ofstream(temp_dir / "signatures.json") << signatures.dump(2) << "\n";
  for (const auto& [asset, source_path] : assets)
    fs::copy_file(source_path, temp_dir / asset, fs::copy_options::overwrite_existing);
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
