// Model weights: get_weights / set_weights (Keras 2.x keras/engine/training.py, base_layer.py:
// the values of model.weights in that order) and the Keras 3 `.weights.h5` file
// (keras/src/saving/saving_lib.py save_weights_only / load_weights_only: an empty group "vars"
// for the model itself, then "layers/<snake_case class name>[_<n>]/vars/<i>", one group per
// layer of model.layers, numbered by class within the list, not by the layer's name).
//
// The values live where training keeps them: the latest checkpoint of config().model_dir.
// set_weights writes a new checkpoint holding the checkpoint's other tensors (optimizer slots,
// global step, input position) with the new values, so fit, evaluate and predict continue
// from them. With no checkpoint yet, the variables are initialized as the Estimator's first
// model_fn call does (one generator seeded with tf_random_seed, in creation order) and written
// as the step-0 checkpoint, so what get_weights returns is what fit starts from.
#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <set>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/variable_store_io.h"
#include "checkpoint/writer.h"
#include "estimator/estimator.h"
#include "estimator/hooks/session_run_hook.h"
#include "keras/model.h"
#include "keras/saving.h"
#include "ops/array_ops.h"
#include "ops/error.h"

namespace est::keras {
namespace {

namespace fs = std::filesystem;
using checkpoint::TensorBundle;

void check_built(const Model& model, const char* what) {
  if (!model.built())
    throw FailedPreconditionError(fmt::format(
        "{}: model \"{}\" has no weights yet; give it an Input/InputLayer, call build(shape), "
        "or fit it first",
        what, model.name()));
}

// Zeros shaped like each model input, batch 1.
std::vector<Tensor> dummy_inputs(const Model& model) {
  std::vector<Tensor> out;
  for (const KerasTensor& input : model.inputs()) {
    Shape shape = input.shape;
    shape[0] = 1;
    auto layer = std::dynamic_pointer_cast<layers::InputLayerImpl>(input.node->layer);
    out.push_back(Tensor::zeros(shape, layer ? layer->options().dtype : ops::DType::kF32));
  }
  return out;
}

}  // namespace

std::string Model::model_dir() {
  if (config_.model_dir.empty()) estimator();  // makes the temporary directory
  return config_.model_dir;
}

TensorBundle Model::read_state() {
  if (training_session_) return training_session_->checkpoint_bundle().snapshot();
  std::string dir = model_dir();
  if (auto latest = checkpoint::latest_checkpoint(dir)) return checkpoint::load(*latest);
  check_built(*this, "get_weights");
  nn::VariableStore store;
  uint64_t seed = config_.tf_random_seed ? *config_.tf_random_seed : std::random_device{}();
  nn::ModelContext ctx(store, nn::Mode::kPredict, seed);
  call(ctx, dummy_inputs(*this));
  nn::get_or_create_global_step(store);
  TensorBundle state = checkpoint::bundle_from_store(store).snapshot();
  write_state(state);
  return state;
}

void Model::write_state(const TensorBundle& state) {
  if (training_session_)
    throw FailedPreconditionError(fmt::format(
        "model \"{}\": its checkpoint cannot be replaced while fit is running (restore or load "
        "before or after fit; set_weights works during it)",
        name_));
  std::string dir = model_dir();
  fs::create_directories(dir);
  std::string file = checkpoint::checkpoint_file_name("model.ckpt", state.global_step);
  checkpoint::save((fs::path(dir) / file).string(), state);
  checkpoint::CheckpointState record =
      checkpoint::read_checkpoint_state(dir).value_or(checkpoint::CheckpointState{});
  auto& paths = record.all_model_checkpoint_paths;
  auto& stamps = record.all_model_checkpoint_timestamps;
  for (size_t i = 0; i < paths.size(); ++i)
    if (paths[i] == file) {
      paths.erase(paths.begin() + static_cast<std::ptrdiff_t>(i));
      if (i < stamps.size()) stamps.erase(stamps.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  if (stamps.size() != paths.size()) stamps.assign(paths.size(), 0.0);
  paths.push_back(file);
  stamps.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()));
  record.model_checkpoint_path = file;
  checkpoint::write_checkpoint_state(dir, record);
}

std::vector<Tensor> Model::get_weights() {
  check_built(*this, "get_weights");
  TensorBundle state = read_state();
  std::vector<Tensor> out;
  for (const auto& [name, spec] : weights()) {
    const checkpoint::TensorEntry* entry = state.find(name);
    if (!entry)
      throw NotFoundError(fmt::format(
          "get_weights: weight \"{}\" of model \"{}\" is not in the latest checkpoint of {}; "
          "the model changed since it was trained there: use a new config().model_dir",
          name, name_, config_.model_dir));
    out.push_back(entry->value);
  }
  return out;
}

void Model::set_weights(const std::vector<Tensor>& values) {
  check_built(*this, "set_weights");
  auto specs = weights();
  if (values.size() != specs.size())
    throw InvalidArgumentError(fmt::format(
        "You called `set_weights(weights)` on model \"{}\" with a weight list of length {}, but "
        "the model was expecting {} weights; pass get_weights()'s list with new values",
        name_, values.size(), specs.size()));
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].shape() != specs[i].second.shape)
      throw InvalidArgumentError(
          fmt::format("set_weights: weight {} (\"{}\") has shape {}, but model \"{}\" expects {}",
                      i, specs[i].first, ops::shape_str(values[i].shape()), name_,
                      ops::shape_str(specs[i].second.shape)));
  if (training_session_) {  // mid-fit: into the running variables
    for (size_t i = 0; i < values.size(); ++i) {
      nn::VariableStore& store = training_session_->store();
      Tensor current = store.get(specs[i].first).value;
      store.assign(specs[i].first, ops::cast(values[i], current.dtype()).to(current.device()));
    }
    return;
  }
  TensorBundle state = read_state();
  for (size_t i = 0; i < values.size(); ++i) {
    checkpoint::TensorEntry* entry = state.find(specs[i].first);
    Tensor value = values[i].to(ops::Device::cpu()).clone();
    if (entry && value.dtype() != entry->value.dtype())
      value = ops::cast(value, entry->value.dtype());
    if (entry)
      entry->value = value;
    else
      state.add_variable(specs[i].first, value, specs[i].second.trainable);
  }
  write_state(state);
}

void Model::save_weights(const std::string& path) {
  if (!path.ends_with(".weights.h5"))
    throw InvalidArgumentError(fmt::format(
        "The filename must end in `.weights.h5`. Received: filepath={} (Keras 3's "
        "save_weights writes the .weights.h5 layout; save(\"x.keras\") saves the whole model)",
        path));
  std::vector<Tensor> values = get_weights();
  H5File file = H5File::create();
  file.create_group("vars");
  write_layer_weights(file, *this, values);
  file.save_as(path);
}

void Model::load_weights(const std::string& path) {
  if (!fs::exists(path)) throw NotFoundError(fmt::format("load_weights: no file at {}", path));
  if (!path.ends_with(".weights.h5") && !path.ends_with(".keras"))
    throw InvalidArgumentError(fmt::format(
        "load_weights: {} is neither a `.weights.h5` file nor a `.keras` archive", path));
  check_built(*this, "load_weights");
  if (path.ends_with(".keras")) {
    set_weights(keras_archive_weights(path, *this));
    return;
  }
  set_weights(read_layer_weights(H5File::read(path), *this));
}

}  // namespace est::keras
