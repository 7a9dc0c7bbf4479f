// Model::save and keras::load_model for Keras 3's `.keras` archive, following
// keras/src/saving/saving_lib.py (_save_model_to_fileobj, H5IOStore, H5Entry): a zip written
// by zipfile (ZIP_STORED) holding, in this order, metadata.json ({"keras_version",
// "date_saved": "%Y-%m-%d@%H:%M:%S"}), config.json (serialization.h) and model.weights.h5: an
// empty group "vars" (the model's own variables), "layers/<key>/vars/<i>" per layer, and
// "optimizer/vars/<i>" (iterations, learning_rate, slots; optimizer_state.h) when compiled.
#include <fmt/format.h>

#include <ctime>
#include <filesystem>

#include "keras/saving.h"
#include "keras/serialization.h"
#include "keras/zip_archive.h"
#include "ops/error.h"

namespace est::keras {
namespace {

constexpr const char* kKerasVersion = "3.10.0";  // the version whose layout this follows

std::string date_saved() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d@%H:%M:%S", &local);
  return text;
}

// Layer keys of saving_lib._save_container_state: class snake case, then _1, _2 per class.
std::vector<std::string> layer_keys(const Model& model) {
  std::map<std::string, int> used;
  std::vector<std::string> out;
  for (const auto& layer : model.layers()) {
    std::string key = snake_case(layer->class_name());
    int count = used.count(key) ? ++used[key] : (used[key] = 0);
    out.push_back(count == 0 ? key : fmt::format("{}_{}", key, count));
  }
  return out;
}

// Each layer's weight names in the model's weights() list, trainable first.
std::vector<std::vector<size_t>> layer_weight_indices(const Model& model) {
  auto weights = model.weights();
  std::vector<std::vector<size_t>> out;
  for (const auto& layer : model.layers()) {
    std::vector<size_t> indices;
    for (size_t i = 0; i < weights.size(); ++i)
      if (weights[i].first.starts_with(layer->name() + "/")) indices.push_back(i);
    out.push_back(indices);
  }
  return out;
}

}  // namespace

TrainableWeights trainable_weights(const Model& model) {
  TrainableWeights out;
  for (const auto& [name, spec] : model.weights())
    if (spec.trainable) out.emplace_back(name, spec.shape);
  return out;
}

void write_layer_weights(H5File& file, const Model& model, const std::vector<ops::Tensor>& values) {
  auto keys = layer_keys(model);
  auto indices = layer_weight_indices(model);
  for (size_t l = 0; l < keys.size(); ++l) {
    std::string group = "layers/" + keys[l] + "/vars";
    file.create_group(group);
    for (size_t i = 0; i < indices[l].size(); ++i)
      file.write_dataset(fmt::format("{}/{}", group, i), values.at(indices[l][i]));
  }
}

std::vector<ops::Tensor> read_layer_weights(const H5File& file, const Model& model) {
  auto keys = layer_keys(model);
  auto indices = layer_weight_indices(model);
  std::vector<ops::Tensor> out(model.weights().size());
  for (size_t l = 0; l < keys.size(); ++l) {
    std::string group = "layers/" + keys[l] + "/vars";
    size_t stored = file.exists(group) ? file.children(group).size() : 0;
    if (stored != indices[l].size())
      throw DataLossError(fmt::format(
          "{}: layer \"{}\" ({}) expects {} weight(s), the file holds {}; it was saved from "
          "another model",
          file.where(), model.layers()[l]->name(), group, indices[l].size(), stored));
    for (size_t i = 0; i < indices[l].size(); ++i)
      out[indices[l][i]] = file.read_dataset(fmt::format("{}/{}", group, i));
  }
  return out;
}

void restore_model_state(Model& model, const std::vector<ops::Tensor>& weights,
                         const std::vector<OptimizerVariable>& optimizer_variables,
                         const std::vector<ops::Tensor>& optimizer_values) {
  checkpoint::TensorBundle state;
  auto specs = model.weights();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (weights[i].shape() != specs[i].second.shape)
      throw DataLossError(fmt::format("weight \"{}\" is stored with shape {}, the model has {}",
                                      specs[i].first, ops::shape_str(weights[i].shape()),
                                      ops::shape_str(specs[i].second.shape)));
    state.add_variable(specs[i].first, weights[i], specs[i].second.trainable);
  }
  state.add_variable("global_step", ops::Tensor::zeros({}, ops::DType::kI64), false);
  if (model.optimizer() && !optimizer_variables.empty())
    apply_optimizer_values(optimizer_variables, optimizer_values, *model.optimizer(), state);
  model.write_state(state);
}

void save_keras_archive(Model& model, const std::string& path) {
  std::vector<ops::Tensor> weights = model.get_weights();
  checkpoint::TensorBundle state = model.read_state();
  H5File file = H5File::create();
  file.create_group("vars");
  write_layer_weights(file, model, weights);
  if (model.optimizer()) {
    TrainableWeights trainable = trainable_weights(model);
    auto variables = keras3_optimizer_variables(*model.optimizer(), trainable);
    auto values = optimizer_values(variables, *model.optimizer(), trainable, state);
    file.create_group("optimizer/vars");
    for (size_t i = 0; i < values.size(); ++i)
      file.write_dataset(fmt::format("optimizer/vars/{}", i), values[i]);
  }
  Json metadata{{"keras_version", kKerasVersion}, {"date_saved", date_saved()}};
  write_zip(path, {{"metadata.json", python_json_dumps(metadata)},
                   {"config.json", python_json_dumps(serialize_model(model, KerasVersion::k3))},
                   {"model.weights.h5", file.bytes()}});
}

namespace {

struct Archive {
  Json config;
  std::optional<H5File> weights;
};

Archive read_archive(const std::string& path) {
  Archive out;
  std::string config_text;
  for (auto& [name, bytes] : read_zip(path)) {
    if (name == "config.json") config_text = std::move(bytes);
    if (name == "model.weights.h5") out.weights = H5File::open(bytes, path + ":model.weights.h5");
  }
  if (config_text.empty() || !out.weights)
    throw DataLossError(fmt::format(
        "{} is not a Keras model archive: it has no {}; save the model with model.save(\"{}\")",
        path, config_text.empty() ? "config.json" : "model.weights.h5", path));
  try {
    out.config = Json::parse(config_text);
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("{}: config.json is not valid JSON ({})", path, error.what()));
  }
  return out;
}

}  // namespace

std::vector<ops::Tensor> keras_archive_weights(const std::string& path, const Model& model) {
  return read_layer_weights(*read_archive(path).weights, model);
}

std::unique_ptr<Model> load_keras_archive(const std::string& path) {
  Archive archive = read_archive(path);
  std::string where = path + ":config.json";
  std::unique_ptr<Model> model;
  try {
    model = deserialize_model(archive.config, where);
    if (archive.config.contains("compile_config") && !archive.config["compile_config"].is_null())
      compile_from_config(*model, archive.config["compile_config"], where);
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("{}: unexpected config ({})", where, error.what()));
  }
  const H5File& file = *archive.weights;
  std::vector<ops::Tensor> weights = read_layer_weights(file, *model);
  std::vector<OptimizerVariable> variables;
  std::vector<ops::Tensor> values;
  if (model->optimizer() && file.exists("optimizer/vars")) {
    variables = keras3_optimizer_variables(*model->optimizer(), trainable_weights(*model));
    size_t stored = file.children("optimizer/vars").size();
    if (stored != variables.size())
      throw DataLossError(fmt::format(
          "{}: optimizer/vars holds {} variables, {} expects {}; the optimizer state was saved "
          "from another optimizer or model",
          file.where(), stored, model->optimizer()->name, variables.size()));
    for (size_t i = 0; i < variables.size(); ++i)
      values.push_back(file.read_dataset(fmt::format("optimizer/vars/{}", i)));
  }
  restore_model_state(*model, weights, variables, values);
  return model;
}

void Model::save(const std::string& path) {
  if (path.ends_with(".keras"))
    save_keras_archive(*this, path);
  else if (path.ends_with(".h5") || path.ends_with(".hdf5"))
    save_h5(*this, path);
  else
    throw InvalidArgumentError(fmt::format(
        "Invalid filepath extension for saving: {}. Please add either a `.keras` extension for "
        "the native Keras format (recommended) or a `.h5` extension",
        path));
}

std::unique_ptr<Model> load_model(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw NotFoundError(
        fmt::format("File not found: filepath={}. Please ensure the file is an "
                    "accessible `.keras` zip file or `.h5` file",
                    path));
  if (path.ends_with(".keras")) return load_keras_archive(path);
  if (path.ends_with(".h5") || path.ends_with(".hdf5")) return load_h5(path);
  throw InvalidArgumentError(fmt::format(
      "File format not supported: filepath={}. est::keras loads `.keras` archives and `.h5` "
      "files",
      path));
}

}  // namespace est::keras
