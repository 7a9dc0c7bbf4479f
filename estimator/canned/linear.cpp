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

namespace {

void check_columns(const std::vector<feature_column::ColumnPtr>& columns, const char* estimator) {
  if (columns.empty())
    throw InvalidArgumentError(fmt::format("{}: feature_columns is empty", estimator));
  for (const auto& column : columns)
    if (!column) throw InvalidArgumentError(fmt::format("{}: a feature column is null", estimator));
}

template <class Options>
ModelFn linear_model_fn(const Options& options, std::shared_ptr<const Head> head,
                        std::vector<std::string> label_vocabulary, const char* estimator) {
  check_columns(options.feature_columns, estimator);
  const std::optional<OptimizerArg> optimizer = options.optimizer;
  const size_t n_columns = options.feature_columns.size();
  linear_optimizer(optimizer, n_columns);  // checks the name now
  auto columns = options.feature_columns;
  auto combiner = options.sparse_combiner;
  return canned_model_fn(
      [columns, combiner](const Features& features, ModeKeys, ModelContext& ctx, int64_t units) {
        return linear_logits(columns, combiner, features, ctx, units);
      },
      std::move(head), [optimizer, n_columns] { return linear_optimizer(optimizer, n_columns); },
      std::move(label_vocabulary));
}

}  // namespace

}  // namespace canned

ModelFn LinearClassifierOptions::model_fn(nn::Reduction default_reduction) const {
  const char* kName = "LinearClassifier";
  auto head = canned::classifier_head_of(*this, default_reduction, kName);
  return canned::linear_model_fn(*this, std::move(head), label_vocabulary, kName);
}

ModelFn LinearRegressorOptions::model_fn(nn::Reduction default_reduction) const {
  auto head = canned::regression_head_of(*this, default_reduction);
  return canned::linear_model_fn(*this, std::move(head), {}, "LinearRegressor");
}

ModelFn LinearEstimatorOptions::model_fn(nn::Reduction) const {
  if (!head)
    throw InvalidArgumentError(
        "LinearEstimator: head is required (e.g. canned::regression_head(2)); LinearClassifier "
        "and LinearRegressor choose theirs");
  return canned::linear_model_fn(*this, head, {}, "LinearEstimator");
}

}  // namespace est
