// What Model::compile takes, by object or by name, with Keras 2.x's defaults
// (keras/losses.py, keras/optimizers/optimizer_v2/{gradient_descent,adam}.py, keras/metrics/,
// keras/engine/compile_utils.py), mapped onto est's nn/ losses, optimizers and streaming metrics.
//
// Keras's defaults differ from TF1's: SGD(learning_rate=0.01), Adam(learning_rate=0.001,
// epsilon=1e-7); losses reduce with SUM_OVER_BATCH_SIZE. The optimizers' slots keep est's TF1
// names in the variable store (`dense/kernel/Adam`); the update rules are the same kernels.
// "accuracy"/"acc" is resolved at the first batch from the shapes of y_true and y_pred, as
// compile_utils.MetricsContainer._get_metric_object does: y_pred's last dimension 1 ->
// binary_accuracy; y_true of lower rank (or last dimension 1) -> sparse_categorical_accuracy;
// else categorical_accuracy. The metric keeps the name it was given ("accuracy").
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/losses.h"
#include "nn/metrics.h"
#include "nn/optimizer.h"
#include "ops/tensor.h"

namespace est::keras {

using ops::Tensor;

// loss(y_true, y_pred) -> scalar (SUM_OVER_BATCH_SIZE for Keras's losses).
struct Loss {
  std::string name;  // "sparse_categorical_crossentropy", ...
  std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)> fn;
  bool from_logits = false;  // for the saved config (keras/saving.h)
  // The reduction fn applies, passed to minimize (MinimizeOptions::loss_reduction) for the
  // strategies' loss scaling; Keras's losses set SUM_OVER_BATCH_SIZE. Unset (a loss of one's
  // own): the reduction its nn loss function recorded (nn::loss_reduction).
  std::optional<nn::Reduction> reduction;
};

namespace losses {
Loss SparseCategoricalCrossentropy(bool from_logits = false);
Loss CategoricalCrossentropy(bool from_logits = false);
Loss BinaryCrossentropy(bool from_logits = false);
Loss MeanSquaredError();
}  // namespace losses

// By name ("sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
// "mse"/"mean_squared_error"): InvalidArgumentError naming the valid ones otherwise.
Loss get_loss(const std::string& name);

struct Optimizer {
  std::string name;  // "SGD", "Adam", "RMSprop"
  nn::optim::Optimizer optimizer;
  // The hyperparameters as Keras's get_config names them ("learning_rate", "momentum",
  // "nesterov" 0/1, "beta_1", "beta_2", "epsilon", "rho", "centered" 0/1), for saving.
  std::map<std::string, double> config;
};

namespace optimizers {
struct SGDOptions {
  double learning_rate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
};
Optimizer SGD(SGDOptions options = {});
struct AdamOptions {
  double learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
};
Optimizer Adam(AdamOptions options = {});
// Keras 2.11+'s RMSprop (keras/optimizers/rmsprop.py), compile()'s default optimizer: the
// velocity starts at 0 (TF1's mean square starts at 1), epsilon inside the square root.
struct RMSpropOptions {
  double learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
};
Optimizer RMSprop(RMSpropOptions options = {});
}  // namespace optimizers

// By name ("sgd", "adam", "rmsprop", any case): InvalidArgumentError naming the valid ones
// otherwise.
Optimizer get_optimizer(const std::string& name);

// A metric as compile() takes it: its display name and, once the shapes are known, the
// function giving a batch's streaming statistics.
struct Metric {
  std::string name;
  std::function<nn::metrics::MetricOp(const Tensor& y_true, const Tensor& y_pred)> fn;
};

// The metric for a name given to compile() ("accuracy", "acc", "sparse_categorical_accuracy",
// "categorical_accuracy", "binary_accuracy", "mse", "mae"), for a batch's y_true and y_pred
// (whose shapes pick the accuracy): InvalidArgumentError naming the valid ones otherwise.
Metric get_metric(const std::string& name, const ops::Shape& y_true, const ops::Shape& y_pred);
// The same check without shapes, for compile() to fail early.
void check_metric_name(const std::string& name);

}  // namespace est::keras
