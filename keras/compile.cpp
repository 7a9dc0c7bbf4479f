// Losses, optimizers and metrics for compile(), by object or by name (see compile.h).
#include "keras/compile.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/adagrad.h"
#include "nn/losses.h"
#include "nn/optimizers.h"
#include "ops/array_ops.h"
#include "ops/error.h"
#include "ops/math.h"
#include "ops/nn_ops.h"

namespace est::keras {
namespace {

using nn::Reduction;

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// y_true as class ids [N...]: a trailing dimension of 1 is dropped, floats cast to int64.
Tensor class_ids(const Tensor& y_true, const Tensor& y_pred) {
  Tensor ids = y_true;
  if (ids.shape().size() == y_pred.shape().size() && !ids.shape().empty() &&
      ids.shape().back() == 1)
    ids = ops::squeeze(ids, {static_cast<int>(ids.shape().size()) - 1});
  if (ids.dtype() != ops::DType::kI64 && ids.dtype() != ops::DType::kI32)
    ids = ops::cast(ids, ops::DType::kI64);
  return ids;
}

Tensor as_float(const Tensor& x, const Tensor& like) {
  return x.dtype() == like.dtype() ? x : ops::cast(x, like.dtype());
}

// -sum(labels * log(clip(p))) over the last axis (backend.categorical_crossentropy on
// probabilities).
Tensor probability_crossentropy(const Tensor& onehot, const Tensor& y_pred) {
  Tensor p = ops::clip(y_pred, kEpsilon, 1 - kEpsilon);
  return ops::neg(ops::sum(ops::mul(onehot, ops::log(p)), {-1}));
}

Tensor over_batch(const Tensor& losses) {
  return nn::compute_weighted_loss(losses, 1.0, Reduction::kSumOverBatchSize);
}

nn::metrics::MetricOp accuracy_of(const Tensor& labels, const Tensor& predictions) {
  return nn::metrics::accuracy(labels, predictions);
}

// Keras's losses reduce SUM_OVER_BATCH_SIZE, and say so to minimize.
Loss over_batch_loss(Loss loss) {
  loss.reduction = Reduction::kSumOverBatchSize;
  return loss;
}

Loss with_logits(bool from_logits, Loss loss) {
  loss.from_logits = from_logits;
  return over_batch_loss(std::move(loss));
}

}  // namespace

namespace losses {

Loss SparseCategoricalCrossentropy(bool from_logits) {
  return with_logits(from_logits, {"sparse_categorical_crossentropy",
                                   [from_logits](const Tensor& y_true, const Tensor& y_pred) {
                                     Tensor ids = class_ids(y_true, y_pred);
                                     if (from_logits)
                                       return nn::sparse_softmax_cross_entropy(
                                           ids, y_pred, 1.0, Reduction::kSumOverBatchSize);
                                     int64_t classes = y_pred.shape().back();
                                     return over_batch(probability_crossentropy(
                                         as_float(ops::one_hot(ids, classes), y_pred), y_pred));
                                   }});
}

Loss CategoricalCrossentropy(bool from_logits) {
  return with_logits(
      from_logits,
      {"categorical_crossentropy", [from_logits](const Tensor& y_true, const Tensor& y_pred) {
         Tensor labels = as_float(y_true, y_pred);
         if (from_logits)
           return nn::softmax_cross_entropy(labels, y_pred, 1.0, 0.0, Reduction::kSumOverBatchSize);
         return over_batch(probability_crossentropy(labels, y_pred));
       }});
}

Loss BinaryCrossentropy(bool from_logits) {
  return with_logits(
      from_logits,
      {"binary_crossentropy", [from_logits](const Tensor& y_true, const Tensor& y_pred) {
         Tensor labels = as_float(y_true, y_pred);
         if (labels.shape().size() + 1 == y_pred.shape().size())
           labels = ops::expand_dims(labels, -1);
         Tensor per_element;
         if (from_logits) {
           per_element = ops::sigmoid_cross_entropy_with_logits(labels, y_pred);
         } else {
           Tensor p = ops::clip(y_pred, kEpsilon, 1 - kEpsilon);
           Tensor one_minus = ops::add(ops::neg(p), 1.0);
           per_element =
               ops::neg(ops::add(ops::mul(labels, ops::log(p)),
                                 ops::mul(ops::add(ops::neg(labels), 1.0), ops::log(one_minus))));
         }
         // Keras means over the last axis, then SUM_OVER_BATCH_SIZE.
         return over_batch(ops::mean(per_element, {-1}));
       }});
}

Loss MeanSquaredError() {
  return over_batch_loss({"mean_squared_error", [](const Tensor& y_true, const Tensor& y_pred) {
                            Tensor labels = as_float(y_true, y_pred);
                            if (labels.shape().size() + 1 == y_pred.shape().size())
                              labels = ops::expand_dims(labels, -1);
                            return over_batch(
                                ops::mean(ops::squared_difference(y_pred, labels), {-1}));
                          }});
}

}  // namespace losses

Loss get_loss(const std::string& name) {
  std::string key = lower(name);
  if (key == "sparse_categorical_crossentropy") return losses::SparseCategoricalCrossentropy();
  if (key == "categorical_crossentropy") return losses::CategoricalCrossentropy();
  if (key == "binary_crossentropy") return losses::BinaryCrossentropy();
  if (key == "mse" || key == "mean_squared_error") return losses::MeanSquaredError();
  throw InvalidArgumentError(fmt::format(
      "Unknown loss function: '{}'. Valid names: 'sparse_categorical_crossentropy', "
      "'categorical_crossentropy', 'binary_crossentropy', 'mean_squared_error' ('mse'); or pass "
      "a loss object such as keras::losses::SparseCategoricalCrossentropy(true)",
      name));
}

namespace optimizers {

Optimizer SGD(SGDOptions options) {
  std::map<std::string, double> config{{"learning_rate", options.learning_rate},
                                       {"momentum", options.momentum},
                                       {"nesterov", options.nesterov ? 1 : 0}};
  if (options.momentum == 0) return {"SGD", nn::optim::sgd(options.learning_rate), config};
  return {"SGD", nn::optim::momentum(options.learning_rate, options.momentum, options.nesterov),
          config};
}

Optimizer Adam(AdamOptions options) {
  return {"Adam",
          nn::optim::adam(options.learning_rate, options.beta_1, options.beta_2, options.epsilon),
          {{"learning_rate", options.learning_rate},
           {"beta_1", options.beta_1},
           {"beta_2", options.beta_2},
           {"epsilon", options.epsilon}}};
}

Optimizer RMSprop(RMSpropOptions options) {
  return {"RMSprop",
          nn::optim::rmsprop(options.learning_rate, options.rho, options.momentum, options.epsilon,
                             options.centered,
                             /*initial_mean_square=*/0.0),
          {{"learning_rate", options.learning_rate},
           {"rho", options.rho},
           {"momentum", options.momentum},
           {"epsilon", options.epsilon},
           {"centered", options.centered ? 1 : 0}}};
}

Optimizer Adagrad(AdagradOptions options) {
  return {"Adagrad",
          nn::optim::adagrad_with_epsilon(options.learning_rate, options.initial_accumulator_value,
                                          options.epsilon),
          {{"learning_rate", options.learning_rate},
           {"initial_accumulator_value", options.initial_accumulator_value},
           {"epsilon", options.epsilon}}};
}

}  // namespace optimizers

Optimizer get_optimizer(const std::string& name) {
  std::string key = lower(name);
  if (key == "sgd") return optimizers::SGD();
  if (key == "adam") return optimizers::Adam();
  if (key == "rmsprop") return optimizers::RMSprop();
  if (key == "adagrad") return optimizers::Adagrad();
  throw InvalidArgumentError(
      fmt::format("Unknown optimizer: '{}'. Valid names: 'sgd', 'adam', 'rmsprop', 'adagrad'; or "
                  "pass an optimizer object such as "
                  "keras::optimizers::SGD({{.learning_rate = 0.001}})",
                  name));
}

std::vector<std::string> CompileMetrics::all_names() const {
  if (const auto* list = std::get_if<MetricList>(&value_)) return *list;
  std::vector<std::string> out;
  if (const auto* lists = std::get_if<MetricLists>(&value_))
    for (const auto& list : *lists) out.insert(out.end(), list.begin(), list.end());
  if (const auto* map = std::get_if<MetricMap>(&value_))
    for (const auto& [output, list] : *map) out.insert(out.end(), list.begin(), list.end());
  return out;
}

void check_metric_name(const std::string& name) {
  static const char* const kNames[] = {
      "accuracy",           "acc", "sparse_categorical_accuracy", "categorical_accuracy",
      "binary_accuracy",    "mse", "mean_squared_error",          "mae",
      "mean_absolute_error"};
  for (const char* known : kNames)
    if (name == known) return;
  throw InvalidArgumentError(
      fmt::format("Unknown metric function: '{}'. Valid names: 'accuracy' ('acc'), "
                  "'sparse_categorical_accuracy', 'categorical_accuracy', 'binary_accuracy', "
                  "'mean_squared_error' ('mse'), 'mean_absolute_error' ('mae')",
                  name));
}

Metric get_metric(const std::string& name, const ops::Shape& y_true, const ops::Shape& y_pred) {
  check_metric_name(name);
  std::string kind = name;
  if (name == "accuracy" || name == "acc") {
    bool is_binary = !y_pred.empty() && y_pred.back() == 1;
    bool is_sparse = y_true.size() < y_pred.size() || (!y_true.empty() && y_true.back() == 1 &&
                                                       !y_pred.empty() && y_pred.back() > 1);
    kind = is_binary ? "binary_accuracy"
                     : (is_sparse ? "sparse_categorical_accuracy" : "categorical_accuracy");
  }
  if (kind == "sparse_categorical_accuracy")
    return {name, [](const Tensor& t, const Tensor& p) {
              return accuracy_of(class_ids(t, p), ops::argmax(p, -1));
            }};
  if (kind == "categorical_accuracy")
    return {name, [](const Tensor& t, const Tensor& p) {
              return accuracy_of(ops::argmax(t, -1), ops::argmax(p, -1));
            }};
  if (kind == "binary_accuracy")
    return {name, [](const Tensor& t, const Tensor& p) {
              Tensor labels = as_float(t, p);
              if (labels.shape().size() + 1 == p.shape().size())
                labels = ops::expand_dims(labels, -1);
              Tensor half = ops::mul(ops::add(ops::neg(p), 1.0), 0.0);  // zeros like p
              return accuracy_of(labels, as_float(ops::greater(p, ops::add(half, 0.5)), p));
            }};
  bool squared = kind == "mse" || kind == "mean_squared_error";
  return {name, [squared](const Tensor& t, const Tensor& p) {
            Tensor labels = as_float(t, p);
            if (labels.shape().size() + 1 == p.shape().size())
              labels = ops::expand_dims(labels, -1);
            return squared ? nn::metrics::mean_squared_error(labels, p)
                           : nn::metrics::mean_absolute_error(labels, p);
          }};
}

}  // namespace est::keras
