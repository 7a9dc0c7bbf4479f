// A Keras model's variables under TF2's object-based checkpoint keys, as Keras 2.x's
// model.save_weights writes them in TensorFlow's format (what keras_lib.py's
// _save_first_checkpoint writes with checkpoint_format "checkpoint": keras/keras_model.ckpt under
// the estimator's model_dir). Internal to keras/ (model_to_estimator.cpp).
//
// The object graph follows Keras 2.x (keras/engine/functional.py _layer_checkpoint_dependencies:
// each layer of model.layers as `layer-<i>` and, when it has weights, first as
// `layer_with_weights-<k>`; the compiled optimizer as `optimizer`; keras_lib.py tracks the
// estimator's global step as `estimator_global_step`), OptimizerV2 (optimizer_v2.py: `iter`, then
// its hyperparameters in sorted order, and a slot per trainable variable and slot name) and
// TensorFlow's graph view (tensorflow/python/checkpoint/graph_view.py, util.py: nodes numbered
// breadth first from the model, slots after them, numbered slot name by slot name; keys
// `<path>/.ATTRIBUTES/VARIABLE_VALUE` and
// `<variable's path>/.OPTIMIZER_SLOT/optimizer/<slot>/.ATTRIBUTES/VARIABLE_VALUE`). Full names are
// those of a TF2 Keras model: `dense/kernel`, `Adam/iter`, `Adam/dense/kernel/m`; the global
// step's is `global_step`. So a checkpoint that Keras wrote for the same layers reads the same
// (tests/keras/testdata/README.md has one), and est's reader (checkpoint/tf_object_graph.h) maps
// every variable back to est's name, slots to TF1's slot names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/model.h"

namespace est::keras {

struct ObjectCheckpointOptions {
  std::vector<Tensor> weights;  // model.weights() order: the layers' values
  double learning_rate = 0.0;   // the optimizer's, written as its `learning_rate` hyperparameter
  int64_t iterations = 0;       // the optimizer's `iter`
  // keras_lib.py's `estimator_global_step`; unset: not tracked (plain model.save_weights).
  std::optional<int64_t> estimator_global_step;
};

// Writes the TensorFlow checkpoint `prefix` (.index and .data-00000-of-00001) of the compiled
// `model`: its weights, the optimizer's iterations and hyperparameters, its slots at their
// initial values (zeros; Adagrad: initial_accumulator_value), and the object graph. Returns the
// keys written, sorted. InvalidArgumentError when the weights do not match the model's.
std::vector<std::string> write_object_checkpoint(const std::string& prefix, const Model& model,
                                                 const ObjectCheckpointOptions& options);

}  // namespace est::keras
