// DNNLinearCombinedClassifier, DNNLinearCombinedRegressor and DNNLinearCombinedEstimator (any
// head), "wide & deep" (tf.estimator's, after tensorflow/estimator
// canned/dnn_linear_combined.py): the logits of a linear model over linear_feature_columns plus
// those of a DNN over dnn_feature_columns, trained by two optimizers, each over its own
// variables (linear/... and dnn/..., named as in linear.h and dnn.h), in one step that counts
// the global step once.
//
// Defaults as TF's: linear_optimizer Ftrl with learning rate min(0.005, 1 / sqrt(number of
// linear columns)), dnn_optimizer Adagrad with 0.001, dnn_activation_fn relu. Either column
// list may be empty (not both); dnn_hidden_units is required with DNN columns.
// est:: classes are TF2's (SUM_OVER_BATCH_SIZE), est::compat::v1:: classes TF1's (SUM).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/warm_start.h"
#include "estimator/canned/canned_estimator.h"
#include "estimator/canned/canned_util.h"
#include "estimator/estimator.h"
#include "feature_column/column.h"
#include "feature_column/dense_columns.h"
#include "nn/activation.h"
#include "nn/functions.h"

namespace est {

namespace canned {
inline constexpr double kCombinedDnnLearningRate = 0.001;
// dnn_linear_combined.py's _linear_learning_rate: min(0.005, 1 / sqrt(n_columns)).
double combined_linear_learning_rate(size_t n_columns);
}  // namespace canned

struct DNNLinearCombinedClassifierOptions {
  std::string model_dir;
  std::vector<feature_column::ColumnPtr> linear_feature_columns;
  canned::OptimizerArg linear_optimizer = std::string("Ftrl");
  std::vector<feature_column::DenseColumnPtr> dnn_feature_columns;
  canned::OptimizerArg dnn_optimizer = std::string("Adagrad");
  std::vector<int64_t> dnn_hidden_units;
  nn::Activation dnn_activation_fn = nn::relu;
  std::optional<double> dnn_dropout;
  int64_t n_classes = 2;
  std::string weight_column;
  std::vector<std::string> label_vocabulary;
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;  // none: the class's default
  bool batch_norm = false;
  feature_column::Combiner linear_sparse_combiner = feature_column::Combiner::kSum;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using DNNLinearCombinedClassifier = canned::CannedEstimator<DNNLinearCombinedClassifierOptions>;

struct DNNLinearCombinedRegressorOptions {
  std::string model_dir;
  std::vector<feature_column::ColumnPtr> linear_feature_columns;
  canned::OptimizerArg linear_optimizer = std::string("Ftrl");
  std::vector<feature_column::DenseColumnPtr> dnn_feature_columns;
  canned::OptimizerArg dnn_optimizer = std::string("Adagrad");
  std::vector<int64_t> dnn_hidden_units;
  nn::Activation dnn_activation_fn = nn::relu;
  std::optional<double> dnn_dropout;
  int64_t label_dimension = 1;
  std::string weight_column;
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;
  bool batch_norm = false;
  feature_column::Combiner linear_sparse_combiner = feature_column::Combiner::kSum;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using DNNLinearCombinedRegressor = canned::CannedEstimator<DNNLinearCombinedRegressorOptions>;

// tf.estimator.DNNLinearCombinedEstimator: wide & deep over any head.
struct DNNLinearCombinedEstimatorOptions {
  std::shared_ptr<const canned::Head> head;  // required
  std::string model_dir;
  std::vector<feature_column::ColumnPtr> linear_feature_columns;
  canned::OptimizerArg linear_optimizer = std::string("Ftrl");
  std::vector<feature_column::DenseColumnPtr> dnn_feature_columns;
  canned::OptimizerArg dnn_optimizer = std::string("Adagrad");
  std::vector<int64_t> dnn_hidden_units;
  nn::Activation dnn_activation_fn = nn::relu;
  std::optional<double> dnn_dropout;
  RunConfig config;
  bool batch_norm = false;
  feature_column::Combiner linear_sparse_combiner = feature_column::Combiner::kSum;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;

  // The model_fn these options describe (the head carries its own loss_reduction).
  ModelFn model_fn(nn::Reduction) const;
};
using DNNLinearCombinedEstimator = canned::CannedEstimator<DNNLinearCombinedEstimatorOptions>;

namespace compat::v1 {
using DNNLinearCombinedClassifier = canned::CompatV1<est::DNNLinearCombinedClassifier>;
using DNNLinearCombinedRegressor = canned::CompatV1<est::DNNLinearCombinedRegressor>;
}  // namespace compat::v1

}  // namespace est
