// Model::save("x.h5") and load_model for Keras 2's HDF5 file, following Keras 2.x
// keras/saving/legacy/hdf5_format.py (save_model_to_hdf5, save_weights_to_hdf5_group,
// save_optimizer_weights_to_hdf5_group, load_model_from_hdf5) and saving_utils.py
// (model_metadata): root attributes keras_version, backend, model_config and training_config
// (JSON); group "model_weights" with attributes backend, keras_version and layer_names, one
// group per layer of model.layers with attribute weight_names ("dense/kernel:0") and a dataset
// at each name ("model_weights/dense/dense/kernel:0"); group "optimizer_weights" with
// attribute weight_names and a dataset at each ("optimizer_weights/Adam/iter:0").
// Strings are stored as h5py 3 stores them (variable length; see h5_io.h).
//
// Reading also takes Keras 3's legacy h5 (weight_names "sequential/dense/kernel", optimizer
// weights "adam/sequential_dense_kernel_momentum"): layers are matched by name and each
// layer's weights in the order of its weight_names.
#include <fmt/format.h>

#include "keras/saving.h"
#include "keras/serialization.h"
#include "ops/error.h"

namespace est::keras {
namespace {

constexpr const char* kKeras2Version = "2.15.0";

// Each layer's weights (trainable first, as Keras 2's layer.weights), as indices into
// model.weights().
std::vector<size_t> weights_of(const Model& model, const Layer& layer) {
  std::vector<size_t> out;
  auto weights = model.weights();
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].first.starts_with(layer.name() + "/")) out.push_back(i);
  return out;
}

// Keras 2's model.layers: Sequential without its InputLayer, functional with its inputs.
std::vector<LayerPtr> saved_layers(const Model& model) { return model.layers(); }

}  // namespace

void save_h5(Model& model, const std::string& path) {
  std::vector<ops::Tensor> weights = model.get_weights();
  checkpoint::TensorBundle state = model.read_state();
  auto names = model.weights();
  H5File file = H5File::create();
  file.write_string("/", "backend", "tensorflow", true);
  file.write_string("/", "keras_version", kKeras2Version, true);
  file.write_string("/", "model_config",
                    python_json_dumps(serialize_model(model, KerasVersion::k2)));
  Json training = compile_config(model, KerasVersion::k2);
  if (!training.is_null()) file.write_string("/", "training_config", python_json_dumps(training));

  file.create_group("model_weights");
  std::vector<std::string> layer_names;
  for (const auto& layer : saved_layers(model)) layer_names.push_back(layer->name());
  file.write_string("model_weights", "backend", "tensorflow");
  file.write_string("model_weights", "keras_version", kKeras2Version);
  file.write_strings("model_weights", "layer_names", layer_names);
  for (const auto& layer : saved_layers(model)) {
    std::string group = "model_weights/" + layer->name();
    file.create_group(group);
    std::vector<std::string> weight_names;
    for (size_t i : weights_of(model, *layer)) {
      weight_names.push_back(names[i].first + ":0");
      file.write_dataset(group + "/" + weight_names.back(), weights[i]);
    }
    file.write_strings(group, "weight_names", weight_names);
  }
  if (model.optimizer()) {
    TrainableWeights trainable = trainable_weights(model);
    auto variables = keras2_optimizer_variables(*model.optimizer(), trainable);
    auto values = optimizer_values(variables, *model.optimizer(), trainable, state);
    file.create_group("optimizer_weights");
    std::vector<std::string> optimizer_names;
    for (size_t i = 0; i < variables.size(); ++i) {
      optimizer_names.push_back(variables[i].name);
      file.write_dataset("optimizer_weights/" + variables[i].name, values[i]);
    }
    file.write_strings("optimizer_weights", "weight_names", optimizer_names);
  }
  file.save_as(path);
}

std::unique_ptr<Model> load_h5(const std::string& path) {
  H5File file = H5File::read(path);
  std::optional<std::string> config_text = file.read_string("/", "model_config");
  if (!config_text)
    throw InvalidArgumentError(fmt::format(
        "No model config found in the file at {}: it holds no model_config attribute (a "
        "weights-only file from save_weights?); build the model in code and call "
        "model.load_weights(path), or save the whole model with model.save(path)",
        path));
  std::string where = path + ":model_config";
  std::unique_ptr<Model> model;
  try {
    model = deserialize_model(Json::parse(*config_text), where);
    if (auto training = file.read_string("/", "training_config"))
      compile_from_config(*model, Json::parse(*training), path + ":training_config");
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("{}: unexpected config ({})", where, error.what()));
  }
  if (!file.exists("model_weights"))
    throw DataLossError(fmt::format("{}: no model_weights group", path));
  std::vector<ops::Tensor> weights(model->weights().size());
  for (const auto& layer : saved_layers(*model)) {
    std::vector<size_t> indices = weights_of(*model, *layer);
    std::string group = "model_weights/" + layer->name();
    if (indices.empty()) continue;
    if (!file.exists(group))
      throw DataLossError(fmt::format("{}: no weights for layer \"{}\" (group {} is missing)", path,
                                      layer->name(), group));
    std::vector<std::string> names = file.read_strings(group, "weight_names");
    if (names.size() != indices.size())
      throw DataLossError(fmt::format("{}: layer \"{}\" expects {} weight(s), the file holds {}",
                                      path, layer->name(), indices.size(), names.size()));
    for (size_t i = 0; i < names.size(); ++i)
      weights[indices[i]] = file.read_dataset(group + "/" + names[i]);
  }
  std::vector<OptimizerVariable> variables;
  std::vector<ops::Tensor> values;
  if (model->optimizer() && file.exists("optimizer_weights")) {
    std::vector<std::string> names = file.read_strings("optimizer_weights", "weight_names");
    variables = parse_optimizer_variables(names, trainable_weights(*model), path);
    for (const auto& name : names) values.push_back(file.read_dataset("optimizer_weights/" + name));
  }
  restore_model_state(*model, weights, variables, values);
  return model;
}

}  // namespace est::keras
