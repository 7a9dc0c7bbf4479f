// BaselineClassifier, BaselineRegressor and BaselineEstimator (tf.estimator's, after
// tensorflow/estimator canned/baseline.py): a model that ignores its features and learns one bias
// per logit, so it predicts the (weighted) prior of the labels, the number a real model must beat.
//
// Its one variable is baseline/bias [logits_dimension] (zeros); the logits are that bias for
// every example of the batch (the batch size read from the first feature that is not the
// weight column). The optimizer defaults to Ftrl with learning rate 0.3.
// est:: classes are TF2's (SUM_OVER_BATCH_SIZE), est::compat::v1:: classes TF1's (SUM).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/warm_start.h"
#include "estimator/canned/canned_estimator.h"
#include "estimator/canned/canned_util.h"
#include "estimator/estimator.h"

namespace est {

namespace canned {
inline constexpr double kBaselineLearningRate = 0.3;
}  // namespace canned

struct BaselineClassifierOptions {
  std::string model_dir;
  int64_t n_classes = 2;
  std::string weight_column;
  std::vector<std::string> label_vocabulary;
  canned::OptimizerArg optimizer = std::string("Ftrl");
  RunConfig config;
  std::optional<nn::Reduction> loss_reduction;  // none: the class's default

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using BaselineClassifier = canned::CannedEstimator<BaselineClassifierOptions>;

struct BaselineRegressorOptions {
  std::string model_dir;
  int64_t label_dimension = 1;
  std::string weight_column;
  canned::OptimizerArg optimizer = std::string("Ftrl");
  RunConfig config;
  std::optional<nn::Reduction> loss_reduction;

  // The model_fn these options describe; default_reduction is loss_reduction's when unset.
  ModelFn model_fn(nn::Reduction default_reduction) const;
};
using BaselineRegressor = canned::CannedEstimator<BaselineRegressorOptions>;

// tf.estimator.BaselineEstimator: the learned bias over any head.
struct BaselineEstimatorOptions {
  std::shared_ptr<const canned::Head> head;  // required
  std::string model_dir;
  canned::OptimizerArg optimizer = std::string("Ftrl");
  RunConfig config;

  // The model_fn these options describe (the head carries its own loss_reduction).
  ModelFn model_fn(nn::Reduction) const;
};
using BaselineEstimator = canned::CannedEstimator<BaselineEstimatorOptions>;

namespace compat::v1 {
using BaselineClassifier = canned::CompatV1<est::BaselineClassifier>;
using BaselineRegressor = canned::CompatV1<est::BaselineRegressor>;
}  // namespace compat::v1

}  // namespace est
