// compile()'s losses and metrics conformed to a built model's outputs, and a batch's (x, y)
// taken apart for them (internal to keras/). Follows Keras 2.x keras/engine/compile_utils.py
// (LossesContainer, MetricsContainer, map_to_output_names) and keras/engine/training.py
// (Model.metrics' order, compute_loss).
//
// The total loss is the sum over the outputs that have a loss of weight x loss (the weight
// multiplies only when one was given, so a single-output model's loss is its loss alone), plus
// the layers' regularization losses (LossesContainer.__call__). The logs are Keras's
// model.metrics in order: "loss" (the mean of the total, regularization included), then
// "<output>_loss" for each output with a loss when there are several outputs (the mean of that
// output's loss BEFORE its weight, as LossesContainer updates it), then each output's metrics,
// named "<output>_<metric>" when there are several outputs. "accuracy" is resolved per output from
// its y_true and y_pred shapes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/element.h"
#include "estimator/estimator_spec.h"
#include "keras/model.h"

namespace est::keras {

class CompiledLossesAndMetrics {
 public:
  // InvalidArgumentError naming the output names for a map key that names no output, a list
  // whose length is not the number of outputs, no loss for any output, or two metrics logged
  // under the same name; compile.h's errors for unknown loss or metric names.
  CompiledLossesAndMetrics(const CompileOptions& options, std::vector<std::string> output_names,
                           const std::string& model);

  // The output names it was made for.
  const std::vector<std::string>& output_names() const { return output_names_; }
  // "loss", the per-output losses, the metrics: the logs' names in Keras's order.
  const std::vector<std::string>& names() const { return names_; }
  // The metrics' names alone (the last entries of names()).
  std::vector<std::string> metric_names() const;
  // Whether output i needs a y (it has a loss or metrics).
  bool needs_target(size_t output) const;

  struct Step {
    Tensor loss;                // the total, which training minimizes
    MetricOps ops;              // keyed by names()
    std::vector<double> means;  // the ops' batch values in names() order
    double rows = 0;            // the batch size
    // The reduction for minimize (MinimizeOptions::loss_reduction): the one every output's
    // loss sets when they agree; unset otherwise (minimize then reads the loss's record).
    std::optional<nn::Reduction> reduction;
  };
  // y_true[i] (undefined where the output has no y) and y_pred[i] for each output, and the
  // model's regularization losses (Model::regularization_losses), added to the total.
  // InvalidArgumentError naming the output when one that needs a y has none.
  Step operator()(const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred,
                  const std::vector<Tensor>& regularization_losses = {}) const;

 private:
  struct Output {
    std::string name;
    std::optional<Loss> loss;
    std::optional<double> weight;
    std::vector<std::string> metrics;       // as given ("accuracy")
    std::vector<std::string> metric_names;  // as logged ("out_accuracy")
  };
  std::string model_;
  std::vector<std::string> output_names_;
  std::vector<Output> outputs_;
  std::vector<std::string> names_;
};

// The model's inputs in order from a batch's features: x's tuple ("#<i>", data_adapter.h), else
// the features named after the inputs (a one-input model also takes its only x feature, whatever
// its name). InvalidArgumentError naming the inputs and the features when one is missing.
std::vector<Tensor> unpack_x(const data::Features& features,
                             const std::vector<std::string>& input_names, const std::string& model);
// Each output's y from a batch (undefined where there is none): y by output name or in output
// order (pack_x_y), or the labels tensor for every output. InvalidArgumentError naming the output
// names for a key that names no output, or a tuple of the wrong length.
std::vector<Tensor> unpack_y(const data::Features& features, const Tensor& labels,
                             const std::vector<std::string>& output_names,
                             const std::string& model);
// "['a', 'b']", as Python prints a list of names (for error messages).
std::string quoted_list(const std::vector<std::string>& names);
// Whether a feature is part of x (not a y that pack_x_y put among the features).
bool is_x_feature(const std::string& key);
// The part of Keras's (x, y) that a pack_x_y feature holds, as its user wrote it, for error
// messages: "x[0]", "x['image']", "y['cls']", "y[1]".
std::string structure_name(const std::string& key);

}  // namespace est::keras
