// The heads' shared checks and helpers (see head_util.h), following base_head.py.
#include "estimator/canned/head_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "feature_column/lookup.h"
#include "ops/array_ops.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::canned::detail {

Tensor reshape_labels(const Tensor& labels, const Tensor& logits, int64_t labels_dimension,
                      const char* head) {
  if (!labels.defined())
    throw InvalidArgumentError(fmt::format(
        "{}: labels are required in TRAIN and EVAL; the input_fn must return them", head));
  const int64_t batch = logits.dim(0);
  const bool ok =
      (labels.rank() == 1 && labels_dimension == 1 && labels.dim(0) == batch) ||
      (labels.rank() == 2 && labels.dim(0) == batch && labels.dim(1) == labels_dimension);
  if (!ok)
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape [{}] do not match logits of shape [{}]; expected [{}, {}]{}", head,
        fmt::join(labels.shape(), ", "), fmt::join(logits.shape(), ", "), batch, labels_dimension,
        labels_dimension == 1 ? fmt::format(" or [{}]", batch) : ""));
  return labels.rank() == 1 ? ops::reshape(labels, {batch, 1}) : labels;
}

void check_label_range(const Tensor& labels, double low, double high, bool high_inclusive,
                       const char* head) {
  const std::vector<double> values = labels.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    if (!(values[i] >= low && (high_inclusive ? values[i] <= high : values[i] < high)))
      throw InvalidArgumentError(fmt::format(
          "{}: label {} at flat position {} is outside [{}, {}{}; check the input_fn's labels "
          "(class ids start at 0)",
          head, values[i], i, low, high, high_inclusive ? "]" : ")"));
}

Tensor reshape_weights(const Tensor& weights, const Tensor& logits, bool allow_per_logit,
                       const char* head) {
  const int64_t batch = logits.dim(0);
  const int64_t logits_dimension = logits.dim(-1);
  Tensor out = weights.rank() == 1 ? ops::reshape(weights, {weights.dim(0), 1}) : weights;
  const bool ok = out.rank() == 2 && out.dim(0) == batch &&
                  (out.dim(1) == 1 || (allow_per_logit && out.dim(1) == logits_dimension));
  if (!ok)
    throw InvalidArgumentError(fmt::format(
        "{}: weights of shape [{}] do not match logits of shape [{}]; expected [{}] or [{}, 1]{}",
        head, fmt::join(weights.shape(), ", "), fmt::join(logits.shape(), ", "), batch, batch,
        allow_per_logit ? fmt::format(" or [{}, {}]", batch, logits_dimension) : ""));
  return out.dtype() == logits.dtype() ? out : ops::cast(out, logits.dtype());
}

Tensor zeros_like(const Tensor& x) {
  const Tensor minus_infinity =
      Tensor::full({}, -std::numeric_limits<double>::infinity(), x.dtype(), x.device());
  return ops::cast(ops::less(x, minus_infinity), x.dtype());
}

Tensor all_class_ids(const Tensor& logits, int64_t n_classes) {
  std::vector<int32_t> ids(static_cast<size_t>(n_classes));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const Tensor first_logit = ops::slice(logits, {0, 0}, {logits.dim(0), 1});  // [batch, 1]
  return ops::add(ops::cast(zeros_like(first_logit), DType::kI32),
                  Tensor::from_vector<int32_t>(ids, {1, n_classes}).to(logits.device()));
}

namespace {

class AccuracyBaseline final : public nn::metrics::Metric {
 public:
  explicit AccuracyBaseline(std::unique_ptr<Metric> label_mean)
      : label_mean_(std::move(label_mean)) {}
  std::string_view name() const override { return "accuracy_baseline"; }
  void merge(const Metric& other) override {
    const auto* same = dynamic_cast<const AccuracyBaseline*>(&other);
    if (!same)
      throw InvalidArgumentError(
          fmt::format("accuracy_baseline: cannot merge a '{}' metric into it", other.name()));
    label_mean_->merge(*same->label_mean_);
  }
  double result() const override {
    const double mean = label_mean_->result();
    return std::max(mean, 1.0 - mean);
  }
  void reset() override { label_mean_->reset(); }
  std::unique_ptr<Metric> clone() const override {
    return std::make_unique<AccuracyBaseline>(label_mean_->clone());
  }

 private:
  std::unique_ptr<Metric> label_mean_;
};

}  // namespace

nn::metrics::MetricOp accuracy_baseline(const nn::metrics::MetricOp& label_mean) {
  return {std::make_shared<AccuracyBaseline>(label_mean.metric->clone())};
}

Tensor class_id_strings(const Tensor& ids, int64_t n_classes) {
  std::vector<std::string> names;
  for (int64_t id = 0; id < n_classes; ++id) names.push_back(std::to_string(id));
  const feature_column::Lookup lookup(
      {.kind = feature_column::LookupTable::Kind::kIndexToString, .string_keys = names});
  Tensor classes = lookup.strings(ids);
  feature_column::report_lookup("class_names", lookup.table(), ids, classes);
  return classes;
}

}  // namespace est::canned::detail
