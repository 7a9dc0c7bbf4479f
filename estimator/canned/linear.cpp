// LinearClassifier / LinearRegressor and the linear logits (tensorflow/estimator
// canned/linear.py, _linear_model_fn and linear_logit_fn_builder).
#include "estimator/canned/linear.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "feature_column/linear.h"

namespace est {
namespace canned {

Tensor linear_logits(const std::vector<feature_column::ColumnPtr>& columns,
                     feature_column::Combiner sparse_combiner, const Features& features,
                     ModelContext& ctx, int64_t units) {
  auto linear_scope = ctx.variable_scope("linear");
  return feature_column::linear_model(
      features, columns, ctx,
      {.units = units, .sparse_combiner = sparse_combiner, .name = "linear_model"});
}

double linear_learning_rate(size_t n_columns) {
  return std::min(kLinearLearningRate,
                  1.0 / std::sqrt(static_cast<double>(std::max<size_t>(n_columns, 1))));
}

optim::Optimizer linear_optimizer(const std::optional<OptimizerArg>& optimizer, size_t n_columns) {
  if (!optimizer) return optim::ftrl(linear_learning_rate(n_columns));
  return get_optimizer_instance(*optimizer, kLinearLearningRate);
}

}  // namespace canned

namespace {

void check_columns(const std::vector<feature_column::ColumnPtr>& columns, const char* estimator) {
  if (columns.empty())
    throw InvalidArgumentError(fmt::format("{}: feature_columns is empty", estimator));
  for (const auto& column : columns)
    if (!column) throw InvalidArgumentError(fmt::format("{}: a feature column is null", estimator));
}

template <class Options>
ModelFn linear_model_fn(const Options& options, std::shared_ptr<const canned::Head> head,
                        std::vector<std::string> label_vocabulary, const char* estimator) {
  check_columns(options.feature_columns, estimator);
  const std::optional<canned::OptimizerArg> optimizer = options.optimizer;
  const size_t n_columns = options.feature_columns.size();
  canned::linear_optimizer(optimizer, n_columns);  // checks the name now
  auto columns = options.feature_columns;
  auto combiner = options.sparse_combiner;
  return canned::canned_model_fn(
      [columns, combiner](const Features& features, ModeKeys, ModelContext& ctx, int64_t units) {
        return canned::linear_logits(columns, combiner, features, ctx, units);
      },
      std::move(head),
      [optimizer, n_columns] { return canned::linear_optimizer(optimizer, n_columns); },
      std::move(label_vocabulary));
}

ModelFn classifier_model_fn(const LinearClassifierOptions& options, nn::Reduction reduction) {
  const char* kName = "LinearClassifier";
  auto head = canned::classifier_head_of(options, reduction, kName);
  return linear_model_fn(options, std::move(head), options.label_vocabulary, kName);
}

ModelFn regressor_model_fn(const LinearRegressorOptions& options, nn::Reduction reduction) {
  auto head = canned::regression_head_of(options, reduction);
  return linear_model_fn(options, std::move(head), {}, "LinearRegressor");
}

ModelFn estimator_model_fn(const LinearEstimatorOptions& options) {
  if (!options.head)
    throw InvalidArgumentError(
        "LinearEstimator: head is required (e.g. canned::regression_head(2)); LinearClassifier "
        "and LinearRegressor choose theirs");
  return linear_model_fn(options, options.head, {}, "LinearEstimator");
}

}  // namespace

LinearEstimator::LinearEstimator(LinearEstimatorOptions options)
    : Estimator(estimator_model_fn(options), options.model_dir, std::move(options.config), {},
                std::move(options.warm_start_from)) {}

LinearClassifier::LinearClassifier(LinearClassifierOptions options)
    : LinearClassifier(std::move(options), nn::Reduction::kSumOverBatchSize) {}

LinearClassifier::LinearClassifier(LinearClassifierOptions options, nn::Reduction reduction)
    : Estimator(classifier_model_fn(options, reduction), options.model_dir,
                std::move(options.config), {}, std::move(options.warm_start_from)) {}

LinearRegressor::LinearRegressor(LinearRegressorOptions options)
    : LinearRegressor(std::move(options), nn::Reduction::kSumOverBatchSize) {}

LinearRegressor::LinearRegressor(LinearRegressorOptions options, nn::Reduction reduction)
    : Estimator(regressor_model_fn(options, reduction), options.model_dir,
                std::move(options.config), {}, std::move(options.warm_start_from)) {}

namespace compat::v1 {
LinearClassifier::LinearClassifier(LinearClassifierOptions options)
    : est::LinearClassifier(std::move(options), nn::Reduction::kSum) {}
LinearRegressor::LinearRegressor(LinearRegressorOptions options)
    : est::LinearRegressor(std::move(options), nn::Reduction::kSum) {}
}  // namespace compat::v1

}  // namespace est
