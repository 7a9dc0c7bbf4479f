// DNNClassifier / DNNRegressor and the DNN logits (tensorflow/estimator canned/dnn.py,
// _DNNModel and _dnn_model_fn).
#include "estimator/canned/dnn.h"

#include <fmt/format.h>

#include <memory>

#include "feature_column/input_layer.h"
#include "nn/layers_dense.h"
#include "nn/layers_dropout.h"
#include "nn/layers_norm.h"

namespace est {
namespace canned {
namespace {

void check_network(const DnnNetwork& network, const char* estimator) {
  if (network.hidden_units.empty())
    throw InvalidArgumentError(fmt::format(
        "{}: hidden_units is empty; give the units of each hidden layer, e.g. {{30, 10}}",
        estimator));
  for (int64_t units : network.hidden_units)
    if (units <= 0)
      throw InvalidArgumentError(
          fmt::format("{}: every hidden_units entry must be positive, got {}", estimator, units));
  if (network.feature_columns.empty())
    throw InvalidArgumentError(fmt::format("{}: feature_columns is empty", estimator));
  for (const auto& column : network.feature_columns)
    if (!column) throw InvalidArgumentError(fmt::format("{}: a feature column is null", estimator));
  if (network.dropout && !(*network.dropout >= 0 && *network.dropout < 1))
    throw InvalidArgumentError(
        fmt::format("{}: dropout must be in [0, 1), got {}", estimator, *network.dropout));
}

LogitFn dnn_logit_fn(DnnNetwork network) {
  return [network = std::move(network)](const Features& features, ModeKeys mode, ModelContext& ctx,
                                        int64_t units) {
    return dnn_logits(network, features, mode, ctx, units);
  };
}

// The DNN's model_fn: the network checked, then the head made (make_head), then the optimizer
// name checked, in that order, so that the first bad argument is the one reported.
template <class Options, class MakeHead>
ModelFn dnn_model_fn(const Options& options, const char* estimator, MakeHead make_head,
                     std::vector<std::string> label_vocabulary = {}) {
  DnnNetwork network{options.hidden_units, options.feature_columns, options.activation_fn,
                     options.dropout, options.batch_norm};
  check_network(network, estimator);
  std::shared_ptr<const Head> head = make_head();
  OptimizerArg optimizer = options.optimizer;
  get_optimizer_instance(optimizer, kDnnLearningRate);  // checks the name now
  return canned_model_fn(
      dnn_logit_fn(std::move(network)), std::move(head),
      [optimizer] { return get_optimizer_instance(optimizer, kDnnLearningRate); },
      std::move(label_vocabulary));
}

}  // namespace

Tensor dnn_logits(const DnnNetwork& network, const Features& features, ModeKeys mode,
                  ModelContext& ctx, int64_t units) {
  const bool training = mode == ModeKeys::kTrain;
  auto dnn_scope = ctx.variable_scope("dnn");
  Tensor net;
  {
    auto input_scope = ctx.variable_scope("input_from_feature_columns");
    net = feature_column::input_layer(features, network.feature_columns, ctx,
                                      {.name = "input_layer"});
  }
  for (size_t i = 0; i < network.hidden_units.size(); ++i) {
    const std::string layer = fmt::format("hiddenlayer_{}", i);
    net = nn::dense(
        ctx, net,
        {.units = network.hidden_units[i], .activation = network.activation_fn, .name = layer});
    if (network.dropout && training) net = nn::dropout(ctx, net, *network.dropout);
    if (network.batch_norm) {
      auto layer_scope = ctx.variable_scope(layer);
      net = nn::batch_normalization(
          ctx, net,
          {.momentum = 0.999, .training = training, .name = fmt::format("batchnorm_{}", i)});
    }
  }
  return nn::dense(ctx, net, {.units = units, .name = "logits"});
}

}  // namespace canned

ModelFn DNNClassifierOptions::model_fn(nn::Reduction default_reduction) const {
  const char* kName = "DNNClassifier";
  return canned::dnn_model_fn(
      *this, kName, [&] { return canned::classifier_head_of(*this, default_reduction, kName); },
      label_vocabulary);
}

ModelFn DNNRegressorOptions::model_fn(nn::Reduction default_reduction) const {
  return canned::dnn_model_fn(*this, "DNNRegressor",
                              [&] { return canned::regression_head_of(*this, default_reduction); });
}

ModelFn DNNEstimatorOptions::model_fn(nn::Reduction) const {
  if (!head)
    throw InvalidArgumentError(
        "DNNEstimator: head is required (e.g. canned::multi_label_head(3)); DNNClassifier and "
        "DNNRegressor choose theirs");
  return canned::dnn_model_fn(*this, "DNNEstimator", [&] { return head; });
}

}  // namespace est
