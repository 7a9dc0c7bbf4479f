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
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <variant>
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
  std::string name;  // "SGD", "Adam", "RMSprop", "Adagrad"
  nn::optim::Optimizer optimizer;
  // The hyperparameters as Keras's get_config names them ("learning_rate", "momentum",
  // "nesterov" 0/1, "beta_1", "beta_2", "epsilon", "rho", "centered" 0/1,
  // "initial_accumulator_value"), for saving.
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
// Keras 2.11+'s and Keras 3's Adagrad (keras/optimizers/adagrad.py): the accumulator (TF1's
// slot `Adagrad`, Keras's `accumulator`) starts at initial_accumulator_value; the step is
// lr * g / sqrt(accumulator + epsilon).
struct AdagradOptions {
  double learning_rate = 0.001;
  double initial_accumulator_value = 0.1;
  double epsilon = 1e-7;
};
Optimizer Adagrad(AdagradOptions options = {});
}  // namespace optimizers

// By name ("sgd", "adam", "rmsprop", "adagrad", any case): InvalidArgumentError naming the valid
// ones otherwise.
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

// compile()'s per-output structures (Keras 2.x keras/engine/compile_utils.py, LossesContainer and
// MetricsContainer), for a model with several outputs; the names are the model's output names
// (Model::output_names(): the output layers' names).
// - loss: one name or Loss for every output, a LossList in output order, or a LossMap keyed by
//   output name; std::nullopt (a list's entry) or a name missing from a map: no loss for that
//   output (Keras's None). A map key that names no output is an InvalidArgumentError naming the
//   output names.
// - loss_weights: none (each loss counts once), a LossWeightList in output order or a
//   LossWeightMap keyed by output name (missing: 1).
// - metrics: a list of names for every output ({"accuracy"}), MetricLists in output order, or a
//   MetricMap keyed by output name. With several outputs a metric is logged as
//   "<output name>_<metric name>" (Keras's MetricsContainer._set_metric_names), and "accuracy"
//   is resolved for each output from its own y_true and y_pred.
using LossArg = std::optional<std::variant<std::string, Loss>>;
using LossList = std::vector<LossArg>;
using LossMap = std::map<std::string, LossArg>;
using LossWeightList = std::vector<double>;
using LossWeightMap = std::map<std::string, double>;
using MetricList = std::vector<std::string>;
using MetricLists = std::vector<MetricList>;
using MetricMap = std::map<std::string, MetricList>;

class CompileMetrics {
 public:
  CompileMetrics() = default;
  CompileMetrics(std::initializer_list<std::string> names) : value_(MetricList(names)) {}
  CompileMetrics(MetricList names) : value_(std::move(names)) {}
  CompileMetrics(MetricLists per_output) : value_(std::move(per_output)) {}
  CompileMetrics(MetricMap by_output) : value_(std::move(by_output)) {}

  const std::variant<MetricList, MetricLists, MetricMap>& value() const { return value_; }
  // Every name given, in order (empty: no metric).
  std::vector<std::string> all_names() const;
  friend bool operator==(const CompileMetrics&, const CompileMetrics&) = default;

 private:
  std::variant<MetricList, MetricLists, MetricMap> value_;
};

}  // namespace est::keras
