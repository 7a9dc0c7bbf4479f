// Merging and results of the metric accumulators (see metrics_state.h).
#include "nn/metrics_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/error.h"

namespace est::nn::metrics::detail {
namespace {

// `other` as a `T` of the same name, or an InvalidArgumentError naming both metrics.
template <class T>
const T& same_kind(const Metric& self, const Metric& other) {
  const T* cast = dynamic_cast<const T*>(&other);
  if (cast == nullptr || cast->name() != self.name())
    throw InvalidArgumentError("metrics: cannot merge '" + std::string(other.name()) + "' into '" +
                               std::string(self.name()) +
                               "'; merge only statistics of the same metric (one running metric "
                               "per eval_metric_ops key)");
  return *cast;
}

double divide_or_zero(double numerator, double denominator) {
  return denominator == 0 ? 0.0 : numerator / denominator;
}

}  // namespace

void MeanMetric::merge(const Metric& other) {
  const auto& that = same_kind<MeanMetric>(*this, other);
  total_ += that.total_;
  count_ += that.count_;
}

double MeanMetric::result() const {
  double value = divide_or_zero(total_, count_);
  return root_ ? std::sqrt(value) : value;
}

void RatioMetric::merge(const Metric& other) {
  const auto& that = same_kind<RatioMetric>(*this, other);
  if (that.config_ != config_)
    throw InvalidArgumentError("metrics: cannot merge " + name_ + that.config_ + " into " + name_ +
                               config_ + "; k and class_id must be the same");
  hits_ += that.hits_;
  misses_ += that.misses_;
}

double RatioMetric::result() const {
  double denominator = hits_ + misses_;
  if (denominator == 0) return nan_when_empty_ ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  return hits_ / denominator;
}

AucMetric::AucMetric(int num_thresholds, AucCurve curve, AucSummation summation)
    : num_thresholds_(num_thresholds),
      curve_(curve),
      summation_(summation),
      positive_buckets_(static_cast<size_t>(num_thresholds) + 1, 0.0),
      negative_buckets_(static_cast<size_t>(num_thresholds) + 1, 0.0) {
  for (double threshold : thresholds(num_thresholds))
    thresholds_.push_back(static_cast<float>(threshold));
}

std::vector<double> AucMetric::thresholds(int num_thresholds) {
  constexpr double kEpsilon = 1e-7;  // keeps predictions of exactly 0 and 1 inside the ends
  std::vector<double> out;
  out.reserve(static_cast<size_t>(num_thresholds));
  out.push_back(0.0 - kEpsilon);
  for (int i = 0; i < num_thresholds - 2; ++i) out.push_back((i + 1) * 1.0 / (num_thresholds - 1));
  out.push_back(1.0 + kEpsilon);
  return out;
}

void AucMetric::add(bool label, double prediction, double weight) {
  // Thresholds increase, so the prediction is above thresholds [0, above) and at most the rest.
  auto first_not_below =
      std::lower_bound(thresholds_.begin(), thresholds_.end(), static_cast<float>(prediction));
  auto above = static_cast<size_t>(first_not_below - thresholds_.begin());
  (label ? positive_buckets_ : negative_buckets_)[above] += weight;
}

AucMetric::Counts AucMetric::counts() const {
  const auto n = static_cast<size_t>(num_thresholds_);
  Counts counts{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n),
                std::vector<double>(n)};
  // At threshold i an example above `above` thresholds is predicted positive when above > i.
  double positives_at_most = 0;  // label-true weight with above <= i
  double negatives_at_most = 0;
  double positives_total = 0;
  double negatives_total = 0;
  for (size_t j = 0; j <= n; ++j) {
    positives_total += positive_buckets_[j];
    negatives_total += negative_buckets_[j];
  }
  for (size_t i = 0; i < n; ++i) {
    positives_at_most += positive_buckets_[i];
    negatives_at_most += negative_buckets_[i];
    counts.false_negatives[i] = positives_at_most;
    counts.true_positives[i] = positives_total - positives_at_most;
    counts.true_negatives[i] = negatives_at_most;
    counts.false_positives[i] = negatives_total - negatives_at_most;
  }
  return counts;
}

void AucMetric::merge(const Metric& other) {
  const auto& that = same_kind<AucMetric>(*this, other);
  if (that.num_thresholds_ != num_thresholds_ || that.curve_ != curve_ ||
      that.summation_ != summation_)
    throw InvalidArgumentError("metrics: cannot merge auc statistics with " +
                               std::to_string(that.num_thresholds_) +
                               " thresholds (or another curve or summation method) into auc "
                               "with " +
                               std::to_string(num_thresholds_) + "; use one configuration");
  for (size_t j = 0; j < positive_buckets_.size(); ++j) {
    positive_buckets_[j] += that.positive_buckets_[j];
    negative_buckets_[j] += that.negative_buckets_[j];
  }
}

void AucMetric::reset() {
  std::fill(positive_buckets_.begin(), positive_buckets_.end(), 0.0);
  std::fill(negative_buckets_.begin(), negative_buckets_.end(), 0.0);
}

double AucMetric::result() const {
  const Counts all = counts();
  const auto& tp = all.true_positives;
  const auto& fn = all.false_negatives;
  const auto& tn = all.true_negatives;
  const auto& fp = all.false_positives;
  const size_t n = thresholds_.size();
  double area = 0;
  if (curve_ == AucCurve::kPR && summation_ == AucSummation::kCarefulInterpolation) {
    // Precision interpolated linearly in the number of predicted positives between thresholds
    // (Davis & Goadrich 2006); every division by zero counts as 0.
    for (size_t i = 0; i + 1 < n; ++i) {
      double positives_here = tp[i] + fp[i];
      double positives_next = tp[i + 1] + fp[i + 1];
      double tp_step = tp[i] - tp[i + 1];
      double slope = divide_or_zero(tp_step, std::max(positives_here - positives_next, 0.0));
      double intercept = tp[i + 1] - slope * positives_next;
      double ratio = positives_here > 0 && positives_next > 0
                         ? divide_or_zero(positives_here, std::max(positives_next, 0.0))
                         : 1.0;
      area += divide_or_zero(slope * (tp_step + intercept * std::log(ratio)),
                             std::max(tp[i + 1] + fn[i + 1], 0.0));
    }
    return area;
  }
  constexpr double kEpsilon = 1e-6;  // TF1's guard against 0/0 in the rates
  std::vector<double> x(n);
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) {
    double recall = (tp[i] + kEpsilon) / (tp[i] + fn[i] + kEpsilon);
    if (curve_ == AucCurve::kROC) {
      x[i] = fp[i] / (fp[i] + tn[i] + kEpsilon);
      y[i] = recall;
    } else {
      x[i] = recall;
      y[i] = (tp[i] + kEpsilon) / (tp[i] + fp[i] + kEpsilon);
    }
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    double height = 0;
    switch (summation_) {
      case AucSummation::kMinoring:
        height = std::min(y[i], y[i + 1]);
        break;
      case AucSummation::kMajoring:
        height = std::max(y[i], y[i + 1]);
        break;
      case AucSummation::kTrapezoidal:
      case AucSummation::kCarefulInterpolation:
        height = (y[i] + y[i + 1]) / 2;
        break;
    }
    area += (x[i] - x[i + 1]) * height;
  }
  return area;
}

ConfusionMetric::ConfusionMetric(Kind kind, int64_t num_classes)
    : kind_(kind),
      num_classes_(num_classes),
      matrix_(static_cast<size_t>(num_classes * num_classes), 0.0) {}

std::string_view ConfusionMetric::name() const {
  return kind_ == Kind::kMeanIou ? "mean_iou" : "mean_per_class_accuracy";
}

void ConfusionMetric::add(int64_t label, int64_t prediction, double weight) {
  matrix_[static_cast<size_t>(label * num_classes_ + prediction)] += weight;
}

void ConfusionMetric::merge(const Metric& other) {
  const auto& that = same_kind<ConfusionMetric>(*this, other);
  if (that.num_classes_ != num_classes_)
    throw InvalidArgumentError("metrics: cannot merge " + std::string(name()) + " with " +
                               std::to_string(that.num_classes_) + " classes into one with " +
                               std::to_string(num_classes_) + "; use one num_classes");
  for (size_t i = 0; i < matrix_.size(); ++i) matrix_[i] += that.matrix_[i];
}

void ConfusionMetric::reset() { std::fill(matrix_.begin(), matrix_.end(), 0.0); }

double ConfusionMetric::result() const {
  const auto classes = static_cast<size_t>(num_classes_);
  double sum = 0;
  int64_t valid = 0;
  for (size_t c = 0; c < classes; ++c) {
    double label_total = 0;       // row sum: examples whose label is c
    double prediction_total = 0;  // column sum: examples predicted as c
    for (size_t other = 0; other < classes; ++other) {
      label_total += matrix_[c * classes + other];
      prediction_total += matrix_[other * classes + c];
    }
    double correct = matrix_[c * classes + c];
    if (kind_ == Kind::kMeanPerClassAccuracy) {
      sum += divide_or_zero(correct, std::max(label_total, 0.0));
    } else {
      double denominator = label_total + prediction_total - correct;
      if (denominator != 0) {
        sum += correct / denominator;
        ++valid;
      }
    }
  }
  if (kind_ == Kind::kMeanPerClassAccuracy) return sum / static_cast<double>(num_classes_);
  return divide_or_zero(sum, static_cast<double>(valid));
}

}  // namespace est::nn::metrics::detail
