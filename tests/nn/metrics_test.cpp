// Metrics against values worked out by hand from TF1's definitions (the arithmetic is in the
// comments), with weights and TF1's squeeze and broadcast rules; auc also against the
// Mann-Whitney statistic counted pair by pair.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "nn/metrics.h"
#include "tests/nn/metrics_test_util.h"
#include "tests/ops/expect_error.h"

using namespace est;
using doctest::Approx;
using est::testing::f32;
using est::testing::i64;

TEST_CASE("accuracy: fraction equal, weighted, trailing 1 squeezed") {
  Tensor labels = i64({1, 2, 3, 4});
  Tensor predictions = i64({1, 0, 3, 0});
  CHECK(metrics::accuracy(labels, predictions).result() == Approx(0.5));
  // Weighted: correct ones weigh 1 and 3 of 1 + 2 + 3 + 4.
  CHECK(metrics::accuracy(labels, predictions, f32({1, 2, 3, 4})).result() == Approx(0.4));
  // labels [4, 1] against predictions [4]; dtypes may differ.
  CHECK(metrics::accuracy(i64({1, 2, 3, 4}, {4, 1}), f32({1, 2, 0, 0})).result() == Approx(0.5));
  // A scalar weight changes nothing.
  CHECK(metrics::accuracy(labels, predictions, Tensor::scalar(3.0)).result() == Approx(0.5));
  // No weight at all: 0 (TF1's div_no_nan).
  CHECK(metrics::accuracy(labels, predictions, f32({0, 0, 0, 0})).result() == 0.0);
  CHECK(metrics::accuracy(labels, predictions).metric->name() == "accuracy");
}

TEST_CASE("mean: weighted, with TF1's weight broadcasting") {
  CHECK(metrics::mean(f32({1, 2, 3, 4})).result() == Approx(2.5));
  CHECK(metrics::mean(f32({1, 2, 3, 4}), f32({0, 0, 1, 1})).result() == Approx(3.5));
  // Weights [2] against values [2, 3] become [2, 1]: (1 * 6 + 3 * 15) / (1 * 3 + 3 * 3).
  Tensor values = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(metrics::mean(values, f32({1, 3})).result() == Approx(51.0 / 12.0));
  // Weights [1, 3] broadcast over rows: (1 + 3 * 2 + 3 + 4 + 3 * 5 + 6) / (2 * 5).
  CHECK(metrics::mean(values, f32({1, 3, 1}, {1, 3})).result() == Approx(35.0 / 10.0));
  // Weights [2, 3, 1] squeeze to [2, 3].
  CHECK(metrics::mean(values, f32({1, 0, 0, 0, 0, 1}, {2, 3, 1})).result() == Approx(3.5));
  CHECK(metrics::mean(f32({}, {0})).result() == 0.0);
}

TEST_CASE("precision and recall cast both sides to bool") {
  // tp at 0 and 3; fp at 1; fn at 2.
  Tensor labels = i64({1, 0, 1, 1, 0});
  Tensor predictions = i64({1, 1, 0, 1, 0});
  CHECK(metrics::precision(labels, predictions).result() == Approx(2.0 / 3.0));
  CHECK(metrics::recall(labels, predictions).result() == Approx(2.0 / 3.0));
  // Probabilities: any non-zero value is true, 0.3 included (TF1 casts, it does not threshold).
  Tensor probabilities = f32({0.9f, 0.3f, 0.0f, 0.1f, 0.0f});
  CHECK(metrics::precision(labels, probabilities).result() == Approx(2.0 / 3.0));
  // Weights: tp 1 + 4, fp 2, fn 3.
  Tensor weights = f32({1, 2, 3, 4, 5});
  CHECK(metrics::precision(labels, predictions, weights).result() == Approx(5.0 / 7.0));
  CHECK(metrics::recall(labels, predictions, weights).result() == Approx(5.0 / 8.0));
  // Nothing predicted / nothing positive: 0.
  CHECK(metrics::precision(labels, i64({0, 0, 0, 0, 0})).result() == 0.0);
  CHECK(metrics::recall(i64({0, 0, 0, 0, 0}), predictions).result() == 0.0);
}

TEST_CASE("mean_squared_error, root_mean_squared_error, mean_absolute_error") {
  // Differences 1, 0, 2.
  Tensor labels = f32({1, 2, 3});
  Tensor predictions = f32({2, 2, 5});
  CHECK(metrics::mean_squared_error(labels, predictions).result() == Approx(5.0 / 3.0));
  CHECK(metrics::root_mean_squared_error(labels, predictions).result() ==
        Approx(std::sqrt(5.0 / 3.0)));
  CHECK(metrics::mean_absolute_error(labels, predictions).result() == Approx(1.0));
  Tensor weights = f32({1, 1, 2});  // (1 + 0 + 2 * 4) / 4 and (1 + 0 + 2 * 2) / 4
  CHECK(metrics::mean_squared_error(labels, predictions, weights).result() == Approx(9.0 / 4.0));
  CHECK(metrics::mean_absolute_error(labels, predictions, weights).result() == Approx(5.0 / 4.0));

  // RMSE streams the mean of squares, then takes the root: sqrt((1 + 0 + 4) / 3), not the mean
  // of the two batches' roots (1 and sqrt(2)).
  auto running = metrics::root_mean_squared_error(f32({1}), f32({2})).metric->clone();
  running->merge(*metrics::root_mean_squared_error(f32({2, 3}), f32({2, 5})).metric);
  CHECK(running->result() == Approx(std::sqrt(5.0 / 3.0)));
}

TEST_CASE("auc on a small case worked by hand") {
  // labels 1, 0, 1 with scores 0.8, 0.6, 0.3 and thresholds {-1e-7, 0.5, 1 + 1e-7}:
  //   t0: tp 2, fp 1, fn 0, tn 0 -> recall 1, fp rate 1, precision 2/3
  //   t1: tp 1, fp 1, fn 1, tn 0 -> recall 1/2, fp rate 1, precision 1/2
  //   t2: tp 0, fp 0, fn 2, tn 1 -> recall ~0, fp rate 0, precision 1 (epsilons)
  Tensor labels = i64({1, 0, 1});
  Tensor scores = f32({0.8f, 0.6f, 0.3f});
  using metrics::AucCurve;
  using metrics::AucSummation;
  // ROC: (1 - 1) * (1 + 1/2) / 2 + (1 - 0) * (1/2 + 0) / 2.
  CHECK(metrics::auc(labels, scores, {}, 3).result() == Approx(0.25).epsilon(1e-5));
  CHECK(metrics::auc(labels, scores, {}, 3, AucCurve::kROC, AucSummation::kMinoring).result() ==
        Approx(0.0).epsilon(1e-5));
  CHECK(metrics::auc(labels, scores, {}, 3, AucCurve::kROC, AucSummation::kMajoring).result() ==
        Approx(0.5).epsilon(1e-5));
  // PR: (1 - 1/2) * (2/3 + 1/2) / 2 + (1/2 - 0) * (1/2 + 1) / 2 = 7/24 + 9/24.
  CHECK(metrics::auc(labels, scores, {}, 3, AucCurve::kPR).result() ==
        Approx(2.0 / 3.0).epsilon(1e-5));
  // Careful interpolation (Davis & Goadrich), positives p = tp + fp = 3, 2, 0:
  //   step 0: slope 1/(3-2) = 1, intercept 1 - 2 = -1: (1 - ln 1.5) / (tp1 + fn1 = 2)
  //   step 1: slope 1/(2-0), intercept 0, p2 = 0 so no log term: 0.5 * 1 / 2
  CHECK(metrics::auc(labels, scores, {}, 3, AucCurve::kPR, AucSummation::kCarefulInterpolation)
            .result() == Approx((1 - std::log(1.5)) / 2 + 0.25).epsilon(1e-9));

  // With many thresholds ROC approaches the exact area: 2 of the 2 (positive, negative) pairs
  // ordered correctly out of... here 1 of 2 pairs: 0.8 > 0.6 yes, 0.3 > 0.6 no.
  CHECK(metrics::auc(labels, scores).result() == Approx(0.5).epsilon(1e-5));
  // Perfect separation.
  CHECK(metrics::auc(i64({0, 0, 1, 1}), f32({0.1f, 0.2f, 0.7f, 0.9f})).result() ==
        Approx(1.0).epsilon(1e-5));
  // labels 0, 0, 1, 1 scored 0.1, 0.4, 0.35, 0.8: 3 of 4 pairs ordered.
  CHECK(metrics::auc(i64({0, 0, 1, 1}), f32({0.1f, 0.4f, 0.35f, 0.8f})).result() ==
        Approx(0.75).epsilon(1e-5));
}

TEST_CASE("auc thresholds are TF1's, compared in float32") {
  // 5 thresholds: {-1e-7, 0.25, 0.5, 0.75, 1 + 1e-7}. A score of exactly 0.5 is not above the
  // threshold 0.5: with 5 thresholds labels 1 at 0.5 and 0 at 0.4 share every bucket, so ROC AUC is
  // 1/2, not 1.
  CHECK(metrics::auc(i64({1, 0}), f32({0.5f, 0.4f}), {}, 5).result() == Approx(0.5).epsilon(1e-5));
  CHECK(metrics::auc(i64({1, 0}), f32({0.51f, 0.4f}), {}, 5).result() == Approx(1.0).epsilon(1e-5));
  // 0.1f is 0.100000001 in double but equal to the threshold 0.1 in float32: not above it.
  CHECK(metrics::auc(i64({1, 0}), f32({0.1f, 0.05f}), {}, 11).result() ==
        Approx(0.5).epsilon(1e-5));
}

TEST_CASE("auc matches the Mann-Whitney statistic when scores sit mid-bucket") {
  // Scores in the middle of threshold buckets: examples in one bucket are exact ties, so the
  // trapezoidal ROC area equals P(score+ > score-) + P(tie) / 2, counted pair by pair here.
  constexpr int kThresholds = 50;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bucket(0, kThresholds - 2);
  std::bernoulli_distribution coin(0.4);
  std::vector<int64_t> labels;
  std::vector<float> scores;
  for (int i = 0; i < 300; ++i) {
    int b = bucket(rng);
    bool label = coin(rng) ? (b > 10) : coin(rng);  // informative but noisy
    labels.push_back(label ? 1 : 0);
    scores.push_back(static_cast<float>((b + 0.5) / (kThresholds - 1)));
  }
  double ordered = 0;
  double pairs = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    for (size_t j = 0; j < labels.size(); ++j) {
      if (labels[i] != 1 || labels[j] != 0) continue;
      pairs += 1;
      if (scores[i] > scores[j]) ordered += 1;
      if (scores[i] == scores[j]) ordered += 0.5;
    }
  }
  double value = metrics::auc(i64(labels), f32(scores), {}, kThresholds).result();
  CHECK(value == Approx(ordered / pairs).epsilon(1e-6));
}

TEST_CASE("auc weights count like repeated examples") {
  Tensor labels = i64({1, 0, 1, 0});
  Tensor scores = f32({0.9f, 0.6f, 0.3f, 0.2f});
  double weighted = metrics::auc(labels, scores, f32({2, 1, 1, 3})).result();
  double repeated =
      metrics::auc(i64({1, 1, 0, 1, 0, 0, 0}), f32({0.9f, 0.9f, 0.6f, 0.3f, 0.2f, 0.2f, 0.2f}))
          .result();
  CHECK(weighted == Approx(repeated).epsilon(1e-12));
  // Pairs: 0.9 beats all 4 negatives (x2), 0.3 beats the three 0.2s: (8 + 3) / (3 * 4).
  CHECK(weighted == Approx(11.0 / 12.0).epsilon(1e-5));
  double weighted_pr =
      metrics::auc(labels, scores, f32({2, 1, 1, 3}), 200, metrics::AucCurve::kPR).result();
  double repeated_pr =
      metrics::auc(i64({1, 1, 0, 1, 0, 0, 0}), f32({0.9f, 0.9f, 0.6f, 0.3f, 0.2f, 0.2f, 0.2f}), {},
                   200, metrics::AucCurve::kPR)
          .result();
  CHECK(weighted_pr == Approx(repeated_pr).epsilon(1e-12));
}

TEST_CASE("precision_at_k and recall_at_k") {
  // Row 0 ranks classes 1, 2, 0; row 1 ranks 2, 0, 1. Labels 1 and 0.
  Tensor scores = f32({0.1f, 0.5f, 0.4f, 0.3f, 0.2f, 0.5f}, {2, 3});
  Tensor labels = i64({1, 0});
  // k = 1: row 0 hit, row 1 miss.
  CHECK(metrics::precision_at_k(labels, scores, 1).result() == Approx(0.5));
  CHECK(metrics::recall_at_k(labels, scores, 1).result() == Approx(0.5));
  // k = 2: both labels retrieved among 4 retrieved classes.
  CHECK(metrics::precision_at_k(labels, scores, 2).result() == Approx(0.5));
  CHECK(metrics::recall_at_k(labels, scores, 2).result() == Approx(1.0));
  // class_id 2 is in both top-2 sets and no label: precision 0 / 2; recall 0 / 0 is NaN (TF1).
  CHECK(metrics::precision_at_k(labels, scores, 2, 2).result() == 0.0);
  CHECK(std::isnan(metrics::recall_at_k(labels, scores, 2, 2).result()));
  // class_id 0: retrieved only in row 1, where it is the label.
  CHECK(metrics::precision_at_k(labels, scores, 2, 0).result() == Approx(1.0));
  CHECK(metrics::recall_at_k(labels, scores, 2, 0).result() == Approx(1.0));
  // class_id 1 at k = 1: row 0 retrieves it and it is the label; no other row has it.
  CHECK(metrics::recall_at_k(labels, scores, 1, 1).result() == Approx(1.0));
  // Labels as [N, 1] are the same; weights per row: (1 * 1) / (1 * 1 + 3 * 1).
  CHECK(metrics::precision_at_k(i64({1, 0}, {2, 1}), scores, 1).result() == Approx(0.5));
  CHECK(metrics::precision_at_k(labels, scores, 1, std::nullopt, f32({1, 3})).result() ==
        Approx(0.25));
  CHECK(metrics::precision_at_k(labels, scores, 1, std::nullopt, f32({1, 3}, {2, 1})).result() ==
        Approx(0.25));
}

TEST_CASE("precision_at_k with label sets, ties and out-of-range labels") {
  Tensor scores = f32({0.1f, 0.5f, 0.4f, 0.3f, 0.2f, 0.5f}, {2, 3});
  // Row sets {1, 2} and {0} (the duplicate counts once). Top 2: {1, 2} -> 2 tp; {2, 0} -> 1 tp,
  // 1 fp. Recall: 3 of the 3 labels.
  Tensor label_sets = i64({1, 2, 0, 0}, {2, 2});
  CHECK(metrics::precision_at_k(label_sets, scores, 2).result() == Approx(3.0 / 4.0));
  CHECK(metrics::recall_at_k(label_sets, scores, 2).result() == Approx(1.0));
  // Ties go to the lower class id, as tf.nn.top_k: class 0 is the top 1, so label 1 is missed.
  Tensor tied = f32({0.5f, 0.5f, 0.1f}, {1, 3});
  CHECK(metrics::precision_at_k(i64({1}), tied, 1).result() == 0.0);
  CHECK(metrics::precision_at_k(i64({0}), tied, 1).result() == 1.0);
  // Label 7 (outside [0, 3)) never matches: a false positive's worth for precision (the
  // retrieved class is wrong) and a false negative for recall.
  Tensor one_row = f32({0.1f, 0.5f, 0.4f}, {1, 3});
  Tensor padded = i64({1, 7}, {1, 2});
  CHECK(metrics::precision_at_k(padded, one_row, 1).result() == Approx(1.0));
  CHECK(metrics::recall_at_k(padded, one_row, 1).result() == Approx(0.5));
  // Nothing at all: NaN, as TF1's tp / (tp + fp).
  CHECK(std::isnan(metrics::precision_at_k(i64({}, {0}), f32({}, {0, 3}), 1).result()));
}

TEST_CASE("mean_iou and mean_per_class_accuracy") {
  // Confusion matrix (rows labels, columns predictions):
  //   label 0 -> 0; label 1 -> 2; label 2 -> 2 and 1.
  //   class 0: tp 1, row 1, column 1: 1 / 1
  //   class 1: tp 0, row 1, column 1: 0 / 2
  //   class 2: tp 1, row 2, column 2: 1 / 3
  Tensor labels = i64({0, 1, 2, 2});
  Tensor predictions = i64({0, 2, 2, 1});
  CHECK(metrics::mean_iou(labels, predictions, 3).result() == Approx(4.0 / 9.0));
  // A class that never appears is left out of the IoU mean...
  CHECK(metrics::mean_iou(labels, predictions, 4).result() == Approx(4.0 / 9.0));
  // ...but counts as 0 in TF1's mean per-class accuracy: (1 + 0 + 1/2) / 3, then / 4.
  CHECK(metrics::mean_per_class_accuracy(labels, predictions, 3).result() == Approx(0.5));
  CHECK(metrics::mean_per_class_accuracy(labels, predictions, 4).result() == Approx(0.375));
  // Weights: the last example (label 2 predicted 1) weighs 0 -> class 1 IoU 0 / (1 + 0 - 0),
  // class 2 1 / (1 + 2 - 1); per-class accuracy 1, 0, 1.
  Tensor weights = f32({1, 1, 1, 0});
  CHECK(metrics::mean_iou(labels, predictions, 3, weights).result() == Approx(0.5));
  CHECK(metrics::mean_per_class_accuracy(labels, predictions, 3, weights).result() ==
        Approx(2.0 / 3.0));
  // Rank 2 inputs are flattened.
  CHECK(metrics::mean_iou(i64({0, 1, 2, 2}, {2, 2}), i64({0, 2, 2, 1}, {2, 2}), 3).result() ==
        Approx(4.0 / 9.0));
}
