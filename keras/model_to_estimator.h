// keras.estimator.model_to_estimator (tensorflow_estimator/python/estimator/keras_lib.py): a
// compiled Keras model as an est::Estimator, whose train / evaluate / predict take an input_fn
// of the dataset the model takes (features keyed by the Input names, or the one feature of a
// one-input model; labels for train and evaluate: one tensor, or for several outputs y keyed by
// output name as keras::pack_x_y packs it, data_adapter.h). The loss is the compiled total (the
// weighted sum over the outputs, compile_utils.h); a y key that names no output is an error
// (TF ignores extra keys).
//
// As TF's: the estimator's variables carry the Keras names (`dense/kernel`, `conv2d/bias`); the
// model's current weights (model.get_weights(): a fitted model's, else its seeded initial
// values) are where the estimator starts; the optimizer's slots and the global step start
// afresh. The model_fn runs the model's graph (TF clones the model: here the layers hold no
// state, their variables are the session's, so running the same graph is the clone);
// predictions are keyed by the output layers' names; evaluate's eval_metric_ops are the compiled
// metrics keyed by their Keras names (or metric_names_map's), plus "loss" as model.evaluate
// computes it (the mean over examples).
//
// checkpoint_format "checkpoint" (TF2's default, and est's): the start is first written as
// model.save_weights writes it in TF's format, model_dir/keras/keras_model.ckpt with TF2's
// object-based keys (`layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE`,
// `optimizer/iter/...`, `estimator_global_step/...`, the `_CHECKPOINTABLE_OBJECT_GRAPH` entry:
// object_checkpoint.h), unless model_dir/keras already names a TensorFlow checkpoint (one that
// Keras wrote, for instance); the weights are then read from that checkpoint by their names
// through its object graph, as TF's warm start reads them. "saver": the weights are taken from
// the model directly. Either way training, evaluation and prediction are the same. The
// estimator's own later checkpoints keep est's format and names in both formats (TF names
// them by object keys under "checkpoint").
//
// Differences from TF, each named: TF warm-starts train() from model_dir/keras/keras_model.ckpt,
// trainable variables only (BatchNormalization's moving statistics are lost,
// tensorflow/tensorflow#19903), and evaluate/predict before any train() run freshly initialized
// variables; est writes every weight of model.weights() as the estimator's step-0
// checkpoint in model_dir (unless it has one: then that one continues, as TF's warm start is
// skipped), so that train, evaluate and predict all start from the Keras model, and evaluate
// equals model.evaluate. The optimizer's learning rate is the model's when model_to_estimator is
// called (fixed then, as TF reads optimizer.get_config() once). The model must outlive the
// estimator.
#pragma once

#include <map>
#include <string>

#include "estimator/estimator.h"
#include "keras/model.h"

namespace est::keras {

struct ModelToEstimatorOptions {
  std::string model_dir;  // takes precedence over config.model_dir; both empty: a temporary one
  RunConfig config;
  std::string checkpoint_format = "checkpoint";  // or "saver" (see above)
  // Keras metric name -> eval_metric_ops key; when given, it must name every compiled metric.
  std::map<std::string, std::string> metric_names_map;
};

// FailedPreconditionError when the model is not compiled or not built; InvalidArgumentError for
// an unknown checkpoint_format, a metric_names_map that does not cover the metrics exactly, or a
// checkpoint in model_dir/keras that lacks one of the model's weights (named) or holds it with
// another shape.
Estimator model_to_estimator(Model& model, ModelToEstimatorOptions options = {});

}  // namespace est::keras
