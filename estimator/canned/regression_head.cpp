// The regression head, following tensorflow/estimator head/regression_head.py (v2): squared
// error per target, weights per example or per target, predictions `predictions` only (TF adds
// `logits` only with an inverse_link_fn, which this head does not take: the prediction is the
// logits), metrics `average_loss`, `label/mean`,
// `prediction/mean`; export_outputs serving_default and "regression" a RegressionOutput of the
// predictions, "predict" every prediction.
#include <fmt/format.h>

#include "estimator/canned/head.h"
#include "estimator/canned/head_util.h"
#include "ops/array_ops.h"
#include "ops/math.h"

namespace est::canned {
namespace {

class RegressionHead final : public Head {
 public:
  RegressionHead(int64_t label_dimension, HeadOptions options)
      : Head(std::move(options)), label_dimension_(label_dimension) {}
  int64_t logits_dimension() const override { return label_dimension_; }

  Predictions predictions(const Tensor& logits) const override {
    check_logits(logits);
    return {{"predictions", logits}};
  }
  std::map<std::string, ExportOutput> export_outputs(
      const Predictions& predictions) const override {
    const ExportOutput regression = RegressionOutput{predictions.at("predictions")};
    return {{"serving_default", regression},
            {"regression", regression},
            {"predict", PredictOutput{predictions}}};
  }

 protected:
  const char* kind() const override { return "regression_head"; }
  Tensor processed_labels(const Tensor& labels, const Tensor& logits) const override {
    return ops::cast(detail::reshape_labels(labels, logits, label_dimension_, kind()),
                     logits.dtype());
  }
  Tensor unweighted_loss(const Tensor& labels, const Tensor& logits) const override {
    return ops::squared_difference(logits, labels);
  }
  MetricOps head_metrics(const LossParts& parts, const Tensor& logits) const override {
    MetricOps out;
    out["average_loss"] = nn::metrics::mean(parts.unweighted_loss, parts.weights);
    out["prediction/mean"] = nn::metrics::mean(logits, parts.weights);
    out["label/mean"] = nn::metrics::mean(parts.labels, parts.weights);
    return out;
  }

 private:
  int64_t label_dimension_;
};

}  // namespace

std::shared_ptr<const Head> regression_head(int64_t label_dimension, HeadOptions options) {
  if (label_dimension < 1)
    throw InvalidArgumentError(fmt::format(
        "regression_head: label_dimension must be at least 1, got {}", label_dimension));
  return std::make_shared<RegressionHead>(label_dimension, std::move(options));
}

}  // namespace est::canned
