// Heads as tensorflow/estimator's (head/base_head.py, binary_class_head.py,
// multi_class_head.py, regression_head.py, multi_label_head.py): given the logits a model
// computed, the labels and the mode, a head owns the rest of model_fn: the loss (weighted by an
// optional weight column, reduced by loss_reduction), the predictions under TF's keys, the eval
// metrics under TF's names, the serving signatures (export_outputs, as TF's heads return them
// in PREDICT) and the EstimatorSpec (TRAIN minimizes the loss with the optimizer it is given).
// The canned estimators are a network producing logits plus one of these.
//
//   EstimatorSpec model_fn(const Features& f, const Tensor& labels, ModeKeys mode, ModelContext&
//   ctx) {
//     Tensor logits = nn::dense(ctx, f.at("x"), {.units = 3});
//     return canned::multi_class_head(3)->create_estimator_spec(f, mode, logits, labels, ctx,
//                                                               optim::adagrad(0.05));
//   }
//
// Predictions are TF's keys and dtypes: `classes` and `all_classes` are strings (the class ids'
// decimal strings, or a label_vocabulary's strings: canned_util.h, around the head). Deviation:
// the optional per-threshold metrics (`accuracy/positive_threshold_0.5`, ...) are not built.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/element.h"
#include "estimator/estimator_spec.h"
#include "estimator/mode_keys.h"
#include "nn/losses.h"
#include "nn/model_context.h"
#include "nn/optimizer.h"

namespace est::canned {

using data::Features;
using ops::Tensor;

// What every head takes besides its own arguments (TF's keyword arguments of the same names).
struct HeadOptions {
  // The features key of per-example weights, [batch] or [batch, 1]; empty: every weight is 1.
  std::string weight_column;
  // How the weighted per-example losses become the training loss: SUM_OVER_BATCH_SIZE in TF2's
  // heads (the default here); TF1's canned classes pass SUM. kNone is rejected.
  nn::Reduction loss_reduction = nn::Reduction::kSumOverBatchSize;
};

class Head {
 public:
  explicit Head(HeadOptions options);
  virtual ~Head() = default;

  // The last dimension the logits must have.
  virtual int64_t logits_dimension() const = 0;

  // The regularized training loss (a scalar): the per-example losses weighted and reduced by
  // loss_reduction, plus the regularization losses.
  Tensor loss(const Tensor& labels, const Tensor& logits, const Features& features = {},
              const std::vector<Tensor>& regularization_losses = {}) const;
  // Every prediction of this head, by TF's PredictionKeys names.
  virtual Predictions predictions(const Tensor& logits) const = 0;
  // The PREDICT spec's export_outputs for these predictions, by TF's keys: "serving_default"
  // and "classification" a ClassificationOutput (scores the probabilities, classes every class's
  // name per example: the predictions' string `all_classes`, the multi-label head's `classes`), or
  // for a regression "serving_default" and "regression" a RegressionOutput of `predictions`; the
  // binary head also "regression", the `logistic`; "predict" a PredictOutput of every prediction.
  virtual std::map<std::string, ExportOutput> export_outputs(
      const Predictions& predictions) const = 0;
  // This batch's eval metrics by TF's MetricKeys names, `loss` (the mean of the training loss
  // over batches) included.
  MetricOps metrics(const Tensor& labels, const Tensor& logits, const Features& features = {},
                    const std::vector<Tensor>& regularization_losses = {}) const;

  // PREDICT: the predictions and export_outputs; EVAL: loss, predictions and metrics; TRAIN: loss,
  // predictions and optimizer.minimize(loss, ctx) (an optimizer is then required). Labels are
  // required outside PREDICT. Each is an InvalidArgumentError naming what is missing.
  EstimatorSpec create_estimator_spec(const Features& features, ModeKeys mode, const Tensor& logits,
                                      const Tensor& labels, nn::ModelContext& ctx,
                                      const std::optional<optim::Optimizer>& optimizer = {},
                                      const std::vector<Tensor>& regularization_losses = {}) const;

 protected:
  // What one batch gives every head: labels as the loss takes them, the unreduced per-example
  // loss and the weights ([batch, 1], or undefined when there is no weight column).
  struct LossParts {
    Tensor labels;
    Tensor unweighted_loss;
    Tensor weights;
  };
  LossParts loss_parts(const Tensor& labels, const Tensor& logits, const Features& features) const;
  // The head's own metrics (everything but `loss` and `regularization_loss`).
  virtual MetricOps head_metrics(const LossParts& parts, const Tensor& logits) const = 0;
  // Labels checked against the logits and converted (float or int ids, [batch, labels_dim]).
  virtual Tensor processed_labels(const Tensor& labels, const Tensor& logits) const = 0;
  virtual Tensor unweighted_loss(const Tensor& labels, const Tensor& logits) const = 0;
  // A name for messages: "binary_class_head", ...
  virtual const char* kind() const = 0;

  void check_logits(const Tensor& logits) const;

  HeadOptions options_;
};

// Two classes, one logit per example: sigmoid cross-entropy. Labels 0/1 (any numeric dtype),
// [batch] or [batch, 1]. Predictions `logits`, `logistic`, `probabilities` [batch, 2],
// `class_ids`, `classes`, `all_class_ids`, `all_classes`; metrics `accuracy`, `precision`,
// `recall`, `auc`, `auc_precision_recall`, `average_loss`, `label/mean`, `prediction/mean`,
// `accuracy_baseline`.
std::shared_ptr<const Head> binary_class_head(HeadOptions options = {});

// n_classes > 2 logits per example: softmax cross-entropy. Labels integer class ids in
// [0, n_classes), [batch] or [batch, 1]. Predictions `logits`, `probabilities`, `class_ids`,
// `classes`, `all_class_ids`, `all_classes`; metrics `accuracy`, `average_loss`.
std::shared_ptr<const Head> multi_class_head(int64_t n_classes, HeadOptions options = {});

// label_dimension real targets per example: squared error. Predictions `predictions` (the
// logits; TF adds `logits` only beside an inverse_link_fn); metrics `average_loss`, `label/mean`,
// `prediction/mean`.
std::shared_ptr<const Head> regression_head(int64_t label_dimension = 1, HeadOptions options = {});

// n_classes >= 2 independent 0/1 labels per example (multi-hot [batch, n_classes]): sigmoid
// cross-entropy averaged over the classes. Predictions `logits`, `probabilities`, `classes`
// (every class's name per example, [batch, n_classes] strings, as multi_label_head.py);
// metrics `average_loss`, `auc`, `auc_precision_recall`.
std::shared_ptr<const Head> multi_label_head(int64_t n_classes, HeadOptions options = {});

}  // namespace est::canned
