// Model and compile configs as Keras writes them. Internal to keras/ (saving).
//
// Keras 3 (keras/src/saving/serialization_lib.py serialize_keras_object, as config.json of a
// `.keras` archive): every object is {"module", "class_name", "config", "registered_name"}, a
// built layer adds "build_config": {"input_shape": [...]}, the model adds "compile_config"
// (optimizer, loss, loss_weights, metrics, weighted_metrics, run_eagerly,
// steps_per_execution, jit_compile); functional layers carry "name" and "inbound_nodes"
// ({"args": [keras tensors with "keras_history": [layer, node, tensor]], "kwargs": {}}).
// Keras 2 (keras/saving/legacy/saving_utils.py model_metadata, hdf5_format.py): objects are
// {"class_name", "config"}; InputLayer has "batch_input_shape"; inbound nodes are
// [[[layer, node, tensor, {}], ...]]; the compile state is "training_config" with
// "optimizer_config".
//
// Reading takes either version, so load_model opens files of both (and Keras 3's legacy h5,
// whose configs are Keras 3 objects without "module").
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "keras/model.h"

namespace est::keras {

using Json = nlohmann::ordered_json;

enum class KerasVersion { k2, k3 };

// JSON text as Python's json.dumps writes it (separators ", " and ": ", keys in order).
std::string python_json_dumps(const Json& value);

// The model's config object (Keras 3: with build_config and compile_config when compiled).
Json serialize_model(const Model& model, KerasVersion version);
// Keras 3's compile_config / Keras 2's training_config; null when not compiled.
Json compile_config(const Model& model, KerasVersion version);

// The model a config describes. InvalidArgumentError naming `where` and the class for a layer
// class est::keras does not have; DataLossError naming `where` for a config of the wrong shape.
std::unique_ptr<Model> deserialize_model(const Json& config, const std::string& where);
// One layer from its entry in a model config (either version).
LayerPtr layer_from_config(const Json& entry, const std::string& where);
// Compiles `model` as a compile_config or training_config says.
void compile_from_config(Model& model, const Json& config, const std::string& where);

// "Adam" -> its optimizer object; "adam" or a Keras optimizer config object.
Optimizer optimizer_from_config(const Json& config, const std::string& where);

}  // namespace est::keras
