// DNNClassifier, DNNRegressor and DNNEstimator (tf.estimator's, after tensorflow/estimator
// canned/dnn.py): a feed-forward network over dense feature columns, then a head.
//
// Variables are named as TF1's _DNNModel names them, so checkpoints map one to one:
//   dnn/input_from_feature_columns/input_layer/<column>/...   (embedding columns)
//   dnn/hiddenlayer_<i>/kernel, dnn/hiddenlayer_<i>/bias       (glorot_uniform, zeros)
//   dnn/hiddenlayer_<i>/batchnorm_<i>/{gamma,beta,moving_mean,moving_variance} (batch_norm)
//   dnn/logits/kernel, dnn/logits/bias
// Each hidden layer is dense + activation_fn, then dropout (training only), then batch
// normalization (momentum 0.999), as in TF. The optimizer defaults to Adagrad with learning
// rate 0.05.
//
//   est::DNNClassifier classifier({.hidden_units = {30, 10}, .feature_columns = columns,
//                                  .n_classes = 3});
//   classifier.train(input_fn, {.steps = 1000});
//
// The classes in est:: are TF2's (loss_reduction SUM_OVER_BATCH_SIZE by default); those in
// est::compat::v1 are tf.compat.v1.estimator's (SUM by default). Optimizer names map to TF1's
// optimizers either way (optimizers.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/warm_start.h"
#include "estimator/canned/canned_estimator.h"
#include "estimator/canned/canned_util.h"
#include "estimator/estimator.h"
#include "feature_column/column.h"
#include "nn/activation.h"
#include "nn/functions.h"

namespace est {

namespace canned {
// The DNN part's logits (dnn_logit_fn_builder), under the current variable scope plus "dnn"
// (the caller opens no scope of its own). Used by the DNN and the wide & deep estimators.
struct DnnNetwork {
  std::vector<int64_t> hidden_units;
  std::vector<feature_column::DenseColumnPtr> feature_columns;
  nn::Activation activation_fn = nn::relu;
  std::optional<double> dropout;
  bool batch_norm = false;
};
Tensor dnn_logits(const DnnNetwork& network, const Features& features, ModeKeys mode,
                  ModelContext& ctx, int64_t units);
// Adagrad's default learning rate in dnn.py.
inline constexpr double kDnnLearningRate = 0.05;
}  // namespace canned

// TF's arguments, in TF's order (designated initializers read like its keyword arguments).
struct DNNClassifierOptions {
  std::vector<int64_t> hidden_units;                            // required, each > 0
  std::vector<feature_column::DenseColumnPtr> feature_columns;  // required
  std::string model_dir;  // empty: config.model_dir, else a temporary directory
  int64_t n_classes = 2;
  std::string weight_column;                  // features key of per-example weights; empty: none
  std::vector<std::string> label_vocabulary;  // empty: labels are class ids in [0, n_classes)
  canned::OptimizerArg optimizer = std::string("Adagrad");
  nn::Activation activation_fn = nn::relu;
  std::optional<double> dropout;  // the probability of dropping a coordinate, in [0, 1)
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;  // none: the class's default
  bool batch_norm = false;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using DNNClassifier = canned::CannedEstimator<DNNClassifierOptions>;

struct DNNRegressorOptions {
  std::vector<int64_t> hidden_units;
  std::vector<feature_column::DenseColumnPtr> feature_columns;
  std::string model_dir;
  int64_t label_dimension = 1;
  std::string weight_column;
  canned::OptimizerArg optimizer = std::string("Adagrad");
  nn::Activation activation_fn = nn::relu;
  std::optional<double> dropout;
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;
  bool batch_norm = false;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using DNNRegressor = canned::CannedEstimator<DNNRegressorOptions>;

// tf.estimator.DNNEstimator: the DNN over any head (multi_label_head, a regression head with
// its own options, ...); the head carries weight_column and loss_reduction.
struct DNNEstimatorOptions {
  std::shared_ptr<const canned::Head> head;  // required
  std::vector<int64_t> hidden_units;
  std::vector<feature_column::DenseColumnPtr> feature_columns;
  std::string model_dir;
  canned::OptimizerArg optimizer = std::string("Adagrad");
  nn::Activation activation_fn = nn::relu;
  std::optional<double> dropout;
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  bool batch_norm = false;

  // The model_fn these options describe (the head carries its own loss_reduction).
  ModelFn model_fn(nn::Reduction) const;
};
using DNNEstimator = canned::CannedEstimator<DNNEstimatorOptions>;

namespace compat::v1 {
// tf.compat.v1.estimator.DNNClassifier / DNNRegressor: loss_reduction SUM by default.
using DNNClassifier = canned::CompatV1<est::DNNClassifier>;
using DNNRegressor = canned::CompatV1<est::DNNRegressor>;
}  // namespace compat::v1

}  // namespace est
