// The classification heads, following tensorflow/estimator head/binary_class_head.py,
// multi_class_head.py and multi_label_head.py (v2): their labels checks, per-example losses,
// predictions, metrics and export_outputs (PREDICT's serving signatures: serving_default and
// "classification" a ClassificationOutput, "predict" every prediction, and for the binary head
// "regression" the logistic). AUCs are Keras's defaults as those heads build them: 200
// thresholds, trapezoidal for ROC and careful interpolation for PR ("interpolation").
#include <fmt/format.h>

#include "estimator/canned/head.h"
#include "estimator/canned/head_util.h"
#include "ops/array_ops.h"
#include "ops/math.h"
#include "ops/nn_ops.h"

namespace est::canned {
namespace {

namespace metrics = nn::metrics;

metrics::MetricOp roc_auc(const Tensor& labels, const Tensor& scores, const Tensor& weights) {
  return metrics::auc(labels, scores, weights, 200, metrics::AucCurve::kROC,
                      metrics::AucSummation::kTrapezoidal);
}
metrics::MetricOp pr_auc(const Tensor& labels, const Tensor& scores, const Tensor& weights) {
  return metrics::auc(labels, scores, weights, 200, metrics::AucCurve::kPR,
                      metrics::AucSummation::kCarefulInterpolation);
}

// What TF's binary and multi-class heads predict from class_ids [batch, 1] (multi_class_head.py,
// binary_class_head.py): `class_ids`, `classes` their decimal strings, `all_class_ids`
// [batch, n_classes] int32 and `all_classes` its decimal strings (base_head.all_classes). A
// label_vocabulary replaces both string keys with its own strings (canned_util.h).
void add_class_predictions(Predictions& predictions, const Tensor& logits, const Tensor& class_ids,
                           int64_t n_classes) {
  Tensor all_class_ids = detail::all_class_ids(logits, n_classes);
  predictions["class_ids"] = class_ids;
  predictions["classes"] = detail::class_id_strings(class_ids, n_classes);
  predictions["all_classes"] = detail::class_id_strings(all_class_ids, n_classes);
  predictions["all_class_ids"] = std::move(all_class_ids);
}

// The export_outputs of every classification head: serving_default and "classification" the
// ClassificationOutput (base_head.classification_output: scores the probabilities, classes the
// string [batch, n_classes] names of every class, the prediction `classes_key`), "predict" all
// of the predictions.
std::map<std::string, ExportOutput> classification_export_outputs(const Predictions& predictions,
                                                                  const char* classes_key) {
  const ExportOutput classification = ClassificationOutput{
      .scores = predictions.at("probabilities"), .classes = predictions.at(classes_key)};
  return {{"serving_default", classification},
          {"classification", classification},
          {"predict", PredictOutput{predictions}}};
}

class BinaryClassHead final : public Head {
 public:
  using Head::Head;
  int64_t logits_dimension() const override { return 1; }

  Predictions predictions(const Tensor& logits) const override {
    check_logits(logits);
    Tensor two_class_logits = ops::concat({detail::zeros_like(logits), logits}, -1);
    Tensor class_ids = ops::expand_dims(ops::argmax(two_class_logits, -1), -1);
    Predictions out{{"logits", logits},
                    {"logistic", ops::sigmoid(logits)},
                    {"probabilities", ops::softmax(two_class_logits, -1)}};
    add_class_predictions(out, logits, class_ids, 2);
    return out;
  }
  std::map<std::string, ExportOutput> export_outputs(
      const Predictions& predictions) const override {
    std::map<std::string, ExportOutput> outputs =
        classification_export_outputs(predictions, "all_classes");
    outputs.emplace("regression", RegressionOutput{predictions.at("logistic")});
    return outputs;
  }

 protected:
  const char* kind() const override { return "binary_class_head"; }
  Tensor processed_labels(const Tensor& labels, const Tensor& logits) const override {
    Tensor out = ops::cast(detail::reshape_labels(labels, logits, 1, kind()), logits.dtype());
    detail::check_label_range(out, 0, 2, /*high_inclusive=*/false, kind());
    return out;
  }
  Tensor unweighted_loss(const Tensor& labels, const Tensor& logits) const override {
    return ops::sigmoid_cross_entropy_with_logits(labels, logits);
  }
  MetricOps head_metrics(const LossParts& parts, const Tensor& logits) const override {
    const Predictions predicted = predictions(logits);
    const Tensor& class_ids = predicted.at("class_ids");
    const Tensor& logistic = predicted.at("logistic");
    const Tensor& w = parts.weights;
    MetricOps out;
    out["average_loss"] = metrics::mean(parts.unweighted_loss, w);
    out["accuracy"] = metrics::accuracy(parts.labels, class_ids, w);
    out["precision"] = metrics::precision(parts.labels, class_ids, w);
    out["recall"] = metrics::recall(parts.labels, class_ids, w);
    out["prediction/mean"] = metrics::mean(logistic, w);
    out["label/mean"] = metrics::mean(parts.labels, w);
    out["accuracy_baseline"] = detail::accuracy_baseline(out["label/mean"]);
    out["auc"] = roc_auc(parts.labels, logistic, w);
    out["auc_precision_recall"] = pr_auc(parts.labels, logistic, w);
    return out;
  }
};

class MultiClassHead final : public Head {
 public:
  MultiClassHead(int64_t n_classes, HeadOptions options)
      : Head(std::move(options)), n_classes_(n_classes) {}
  int64_t logits_dimension() const override { return n_classes_; }

  Predictions predictions(const Tensor& logits) const override {
    check_logits(logits);
    Tensor class_ids = ops::expand_dims(ops::argmax(logits, -1), -1);
    Predictions out{{"logits", logits}, {"probabilities", ops::softmax(logits, -1)}};
    add_class_predictions(out, logits, class_ids, n_classes_);
    return out;
  }
  std::map<std::string, ExportOutput> export_outputs(
      const Predictions& predictions) const override {
    return classification_export_outputs(predictions, "all_classes");
  }

 protected:
  const char* kind() const override { return "multi_class_head"; }
  Tensor processed_labels(const Tensor& labels, const Tensor& logits) const override {
    Tensor out = detail::reshape_labels(labels, logits, 1, kind());
    if (!ops::is_integral(out.dtype()))
      throw InvalidArgumentError(fmt::format(
          "multi_class_head: labels must be integer class ids, got {}; cast them in the input_fn",
          ops::dtype_name(out.dtype())));
    detail::check_label_range(out, 0, double(n_classes_), /*high_inclusive=*/false, kind());
    return out;
  }
  Tensor unweighted_loss(const Tensor& labels, const Tensor& logits) const override {
    Tensor ids = ops::reshape(labels, {labels.dim(0)});
    return ops::reshape(ops::sparse_softmax_cross_entropy_with_logits(ids, logits),
                        {labels.dim(0), 1});
  }
  MetricOps head_metrics(const LossParts& parts, const Tensor& logits) const override {
    const Predictions predicted = predictions(logits);
    MetricOps out;
    out["average_loss"] = metrics::mean(parts.unweighted_loss, parts.weights);
    out["accuracy"] = metrics::accuracy(parts.labels, predicted.at("class_ids"), parts.weights);
    return out;
  }

 private:
  int64_t n_classes_;
};

class MultiLabelHead final : public Head {
 public:
  MultiLabelHead(int64_t n_classes, HeadOptions options)
      : Head(std::move(options)), n_classes_(n_classes) {}
  int64_t logits_dimension() const override { return n_classes_; }

  Predictions predictions(const Tensor& logits) const override {
    check_logits(logits);
    // multi_label_head.py: `classes` is base_head.all_classes, every class's name per example.
    return {{"logits", logits},
            {"probabilities", ops::sigmoid(logits)},
            {"classes",
             detail::class_id_strings(detail::all_class_ids(logits, n_classes_), n_classes_)}};
  }
  std::map<std::string, ExportOutput> export_outputs(
      const Predictions& predictions) const override {
    return classification_export_outputs(predictions, "classes");
  }

 protected:
  const char* kind() const override { return "multi_label_head"; }
  Tensor processed_labels(const Tensor& labels, const Tensor& logits) const override {
    Tensor out =
        ops::cast(detail::reshape_labels(labels, logits, n_classes_, kind()), logits.dtype());
    detail::check_label_range(out, 0, 1, /*high_inclusive=*/true, kind());
    return out;
  }
  // The mean over the classes of the elementwise sigmoid cross-entropy: [batch, 1].
  Tensor unweighted_loss(const Tensor& labels, const Tensor& logits) const override {
    return ops::mean(ops::sigmoid_cross_entropy_with_logits(labels, logits), {-1}, true);
  }
  MetricOps head_metrics(const LossParts& parts, const Tensor& logits) const override {
    const Tensor probabilities = ops::sigmoid(logits);
    MetricOps out;
    out["average_loss"] = metrics::mean(parts.unweighted_loss, parts.weights);
    out["auc"] = roc_auc(parts.labels, probabilities, parts.weights);
    out["auc_precision_recall"] = pr_auc(parts.labels, probabilities, parts.weights);
    return out;
  }

 private:
  int64_t n_classes_;
};

}  // namespace

std::shared_ptr<const Head> binary_class_head(HeadOptions options) {
  return std::make_shared<BinaryClassHead>(std::move(options));
}

std::shared_ptr<const Head> multi_class_head(int64_t n_classes, HeadOptions options) {
  if (n_classes <= 2)
    throw InvalidArgumentError(fmt::format(
        "multi_class_head: n_classes must be > 2, got {}; use binary_class_head for two",
        n_classes));
  return std::make_shared<MultiClassHead>(n_classes, std::move(options));
}

std::shared_ptr<const Head> multi_label_head(int64_t n_classes, HeadOptions options) {
  if (n_classes < 2)
    throw InvalidArgumentError(
        fmt::format("multi_label_head: n_classes must be >= 2, got {}", n_classes));
  return std::make_shared<MultiLabelHead>(n_classes, std::move(options));
}

}  // namespace est::canned
