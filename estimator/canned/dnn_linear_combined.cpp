// DNNLinearCombinedClassifier / Regressor (tensorflow/estimator canned/dnn_linear_combined.py,
// _dnn_linear_combined_model_fn): linear logits + DNN logits, one optimizer per part.
#include "estimator/canned/dnn_linear_combined.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "estimator/canned/dnn.h"
#include "estimator/canned/linear.h"
#include "ops/math.h"

namespace est {
namespace canned {

double combined_linear_learning_rate(size_t n_columns) {
  return std::min(0.005, 1.0 / std::sqrt(static_cast<double>(std::max<size_t>(n_columns, 1))));
}

namespace {

// What both classes share; the head is chosen by each.
struct Combined {
  std::vector<feature_column::ColumnPtr> linear_columns;
  OptimizerArg linear_optimizer;
  DnnNetwork dnn;
  OptimizerArg dnn_optimizer;
  feature_column::Combiner linear_sparse_combiner;
};

template <class Options>
Combined combined(const Options& options) {
  return {options.linear_feature_columns, options.linear_optimizer,
          DnnNetwork{options.dnn_hidden_units, options.dnn_feature_columns,
                     options.dnn_activation_fn, options.dnn_dropout, options.batch_norm},
          options.dnn_optimizer, options.linear_sparse_combiner};
}

void check(const Combined& model, const char* estimator) {
  if (model.linear_columns.empty() && model.dnn.feature_columns.empty())
    throw InvalidArgumentError(fmt::format(
        "{}: either linear_feature_columns or dnn_feature_columns must be defined", estimator));
  if (!model.dnn.feature_columns.empty() && model.dnn.hidden_units.empty())
    throw InvalidArgumentError(fmt::format(
        "{}: dnn_hidden_units must be defined when dnn_feature_columns is specified", estimator));
  for (int64_t units : model.dnn.hidden_units)
    if (units <= 0)
      throw InvalidArgumentError(fmt::format(
          "{}: every dnn_hidden_units entry must be positive, got {}", estimator, units));
  for (const auto& column : model.linear_columns)
    if (!column) throw InvalidArgumentError(fmt::format("{}: a linear column is null", estimator));
  for (const auto& column : model.dnn.feature_columns)
    if (!column) throw InvalidArgumentError(fmt::format("{}: a DNN column is null", estimator));
  if (model.dnn.dropout && !(*model.dnn.dropout >= 0 && *model.dnn.dropout < 1))
    throw InvalidArgumentError(
        fmt::format("{}: dnn_dropout must be in [0, 1), got {}", estimator, *model.dnn.dropout));
}

// The two optimizers, each over its scope (the parts with columns only).
optim::Optimizer two_optimizers(const Combined& model) {
  std::vector<std::pair<std::string, optim::Optimizer>> parts;
  if (!model.dnn.feature_columns.empty())
    parts.emplace_back("dnn",
                       get_optimizer_instance(model.dnn_optimizer, kCombinedDnnLearningRate));
  if (!model.linear_columns.empty())
    parts.emplace_back("linear", get_optimizer_instance(
                                     model.linear_optimizer,
                                     combined_linear_learning_rate(model.linear_columns.size())));
  return per_scope_optimizer(std::move(parts));
}

ModelFn combined_model_fn(Combined model, std::shared_ptr<const Head> head,
                          std::vector<std::string> label_vocabulary, const char* estimator) {
  check(model, estimator);
  two_optimizers(model);  // checks the optimizer names now
  auto shared = std::make_shared<const Combined>(std::move(model));
  return canned_model_fn(
      [shared](const Features& features, ModeKeys mode, ModelContext& ctx, int64_t units) {
        Tensor logits;
        if (!shared->dnn.feature_columns.empty())
          logits = dnn_logits(shared->dnn, features, mode, ctx, units);
        if (!shared->linear_columns.empty()) {
          Tensor linear = linear_logits(shared->linear_columns, shared->linear_sparse_combiner,
                                        features, ctx, units);
          logits = logits.defined() ? ops::add(logits, linear) : linear;
        }
        return logits;
      },
      std::move(head), [shared] { return two_optimizers(*shared); }, std::move(label_vocabulary));
}

}  // namespace

}  // namespace canned

ModelFn DNNLinearCombinedClassifierOptions::model_fn(nn::Reduction default_reduction) const {
  const char* kName = "DNNLinearCombinedClassifier";
  auto head = canned::classifier_head_of(*this, default_reduction, kName);
  return canned::combined_model_fn(canned::combined(*this), std::move(head), label_vocabulary,
                                   kName);
}

ModelFn DNNLinearCombinedRegressorOptions::model_fn(nn::Reduction default_reduction) const {
  auto head = canned::regression_head_of(*this, default_reduction);
  return canned::combined_model_fn(canned::combined(*this), std::move(head), {},
                                   "DNNLinearCombinedRegressor");
}

ModelFn DNNLinearCombinedEstimatorOptions::model_fn(nn::Reduction) const {
  if (!head)
    throw InvalidArgumentError(
        "DNNLinearCombinedEstimator: head is required; DNNLinearCombinedClassifier and "
        "DNNLinearCombinedRegressor choose theirs");
  return canned::combined_model_fn(canned::combined(*this), head, {}, "DNNLinearCombinedEstimator");
}

}  // namespace est
