// The pieces Model::save, load_model and the weight files share. Internal to keras/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keras/h5_io.h"
#include "keras/model.h"
#include "keras/optimizer_state.h"

namespace est::keras {

// Keras 3's layer layout (saving_lib._save_state over model.layers): "layers/<key>/vars/<i>"
// with <key> the snake-case class name numbered within the list ("dense", "dense_1"), every
// layer a group even without weights, each layer's trainable weights then its others.
void write_layer_weights(H5File& file, const Model& model, const std::vector<ops::Tensor>& values);
// The values in model.weights() order; DataLossError naming the file and the group for a
// missing layer or a count that does not match.
std::vector<ops::Tensor> read_layer_weights(const H5File& file, const Model& model);

// The model's trainable weights with their shapes, in Keras's order.
TrainableWeights trainable_weights(const Model& model);

// Makes the model's checkpoint hold these weights and optimizer state (when given), so that
// fit continues from them.
void restore_model_state(Model& model, const std::vector<ops::Tensor>& weights,
                         const std::vector<OptimizerVariable>& optimizer_variables,
                         const std::vector<ops::Tensor>& optimizer_values);

// The `.keras` archive (saving_lib.py) and the Keras 2 `.h5` file (hdf5_format.py).
void save_keras_archive(Model& model, const std::string& path);
std::unique_ptr<Model> load_keras_archive(const std::string& path);
// The weights of a `.keras` archive for `model` (load_weights).
std::vector<ops::Tensor> keras_archive_weights(const std::string& path, const Model& model);
void save_h5(Model& model, const std::string& path);
std::unique_ptr<Model> load_h5(const std::string& path);

}  // namespace est::keras
