// BaselineClassifier / BaselineRegressor (tensorflow/estimator canned/baseline.py,
// _baseline_logit_fn_builder and _baseline_model_fn).
#include "estimator/canned/baseline.h"

#include <fmt/format.h>

#include "nn/initializers.h"
#include "ops/math.h"

namespace est {
namespace {

// The batch size: the first dimension of the first feature other than the weight column;
// every such feature must agree (baseline.py's size checks).
int64_t batch_size(const Features& features, const std::string& weight_column) {
  int64_t batch = -1;
  std::string first;
  for (const auto& [key, feature] : features) {
    if (key == weight_column) continue;
    if (feature.rank() == 0)
      throw InvalidArgumentError(
          fmt::format("Baseline: feature '{}' is a scalar; features need a batch dimension", key));
    if (batch < 0) {
      batch = feature.dim(0);
      first = key;
    } else if (feature.dim(0) != batch) {
      throw InvalidArgumentError(fmt::format(
          "Baseline: features '{}' and '{}' have batch sizes {} and {}; they must agree", first,
          key, batch, feature.dim(0)));
    }
  }
  if (batch < 0)
    throw InvalidArgumentError(
        "Baseline: the features hold nothing but the weight column; give at least one feature "
        "so that the batch size is known");
  return batch;
}

canned::LogitFn baseline_logit_fn(std::string weight_column) {
  return [weight_column = std::move(weight_column)](const Features& features, ModeKeys,
                                                    ModelContext& ctx, int64_t units) {
    auto scope = ctx.variable_scope("baseline");
    Tensor bias = ctx.get_variable("bias", {units}, DType::kF32, nn::zeros());
    const int64_t batch = batch_size(features, weight_column);
    return ops::mul(bias.reshape({1, units}),
                    Tensor::ones({batch, units}, DType::kF32, bias.device()));
  };
}

canned::OptimizerFn baseline_optimizer(const canned::OptimizerArg& optimizer) {
  canned::get_optimizer_instance(optimizer, canned::kBaselineLearningRate);  // checks the name
  return [optimizer] {
    return canned::get_optimizer_instance(optimizer, canned::kBaselineLearningRate);
  };
}

}  // namespace

ModelFn BaselineClassifierOptions::model_fn(nn::Reduction default_reduction) const {
  const char* kName = "BaselineClassifier";
  auto head = canned::classifier_head_of(*this, default_reduction, kName);
  return canned::canned_model_fn(baseline_logit_fn(weight_column), std::move(head),
                                 baseline_optimizer(optimizer), label_vocabulary);
}

ModelFn BaselineRegressorOptions::model_fn(nn::Reduction default_reduction) const {
  auto head = canned::regression_head_of(*this, default_reduction);
  return canned::canned_model_fn(baseline_logit_fn(weight_column), std::move(head),
                                 baseline_optimizer(optimizer));
}

ModelFn BaselineEstimatorOptions::model_fn(nn::Reduction) const {
  if (!head)
    throw InvalidArgumentError(
        "BaselineEstimator: head is required; BaselineClassifier and BaselineRegressor choose "
        "theirs");
  // The head's weight column is not known here: every feature counts for the batch size.
  return canned::canned_model_fn(baseline_logit_fn({}), head, baseline_optimizer(optimizer));
}

}  // namespace est
