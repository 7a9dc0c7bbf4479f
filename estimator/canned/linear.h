// LinearClassifier, LinearRegressor and LinearEstimator (tf.estimator's, after
// tensorflow/estimator canned/linear.py): linear_model over any feature columns, then a head.
//
// Variables are named as TF1's _linear_model_fn names them:
//   linear/linear_model/<column>/weights   [num_buckets or elements, logits_dimension], zeros
//   linear/linear_model/bias_weights       [logits_dimension], zeros
// The optimizer defaults to the name "Ftrl", which trains at linear.py's learning rate 0.2 (as
// every name does); std::nullopt is TF's optimizer=None: Ftrl at min(0.2, 1 / sqrt(number of
// columns)).
// sparse_combiner says how a multivalent categorical column's weights combine (sum default).
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

namespace est {

namespace canned {
// The linear part's logits (linear_logit_fn_builder) under the current scope plus "linear".
Tensor linear_logits(const std::vector<feature_column::ColumnPtr>& columns,
                     feature_column::Combiner sparse_combiner, const Features& features,
                     ModelContext& ctx, int64_t units);
// linear.py's _LEARNING_RATE: what an optimizer given by name trains at.
inline constexpr double kLinearLearningRate = 0.2;
// linear.py's _get_default_optimizer learning rate (optimizer=None only):
// min(0.2, 1 / sqrt(n_columns)).
double linear_learning_rate(size_t n_columns);
// The optimizer of a linear model: `optimizer` by get_optimizer_instance at 0.2, or when it is
// std::nullopt Ftrl at linear_learning_rate(n_columns) (linear.py's
// `optimizer or _get_default_optimizer(feature_columns)`).
optim::Optimizer linear_optimizer(const std::optional<OptimizerArg>& optimizer, size_t n_columns);
}  // namespace canned

struct LinearClassifierOptions {
  std::vector<feature_column::ColumnPtr> feature_columns;  // required
  std::string model_dir;
  int64_t n_classes = 2;
  std::string weight_column;
  std::vector<std::string> label_vocabulary;
  // A name (at learning rate 0.2), an optimizer, or std::nullopt (TF's None: Ftrl at
  // min(0.2, 1 / sqrt(number of columns))).
  std::optional<canned::OptimizerArg> optimizer = canned::OptimizerArg(std::string("Ftrl"));
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;  // none: the class's default
  feature_column::Combiner sparse_combiner = feature_column::Combiner::kSum;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using LinearClassifier = canned::CannedEstimator<LinearClassifierOptions>;

struct LinearRegressorOptions {
  std::vector<feature_column::ColumnPtr> feature_columns;
  std::string model_dir;
  int64_t label_dimension = 1;
  std::string weight_column;
  std::optional<canned::OptimizerArg> optimizer = canned::OptimizerArg(std::string("Ftrl"));
  RunConfig config;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;
  std::optional<nn::Reduction> loss_reduction;
  feature_column::Combiner sparse_combiner = feature_column::Combiner::kSum;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using LinearRegressor = canned::CannedEstimator<LinearRegressorOptions>;

// tf.estimator.LinearEstimator: the linear model over any head.
struct LinearEstimatorOptions {
  std::shared_ptr<const canned::Head> head;  // required
  std::vector<feature_column::ColumnPtr> feature_columns;
  std::string model_dir;
  std::optional<canned::OptimizerArg> optimizer = canned::OptimizerArg(std::string("Ftrl"));
  RunConfig config;
  feature_column::Combiner sparse_combiner = feature_column::Combiner::kSum;
  std::optional<checkpoint::WarmStartSettings> warm_start_from;

  // The model_fn these options describe (the head carries its own loss_reduction).
  ModelFn model_fn(nn::Reduction) const;
};
using LinearEstimator = canned::CannedEstimator<LinearEstimatorOptions>;

namespace compat::v1 {
using LinearClassifier = canned::CompatV1<est::LinearClassifier>;
using LinearRegressor = canned::CompatV1<est::LinearRegressor>;
}  // namespace compat::v1

}  // namespace est
