// Metrics as streams: batches merged (in any order) equal one batch of everything, reset and
// clone, and the errors (bad shapes, class ids, thresholds, merging different metrics).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "nn/metrics.h"
#include "tests/nn/metrics_test_util.h"
#include "tests/ops/expect_error.h"

using namespace est;
using doctest::Approx;
using est::testing::contains;
using est::testing::error_message;
using est::testing::f32;
using est::testing::i64;
using est::testing::rows;

namespace {

// One named metric over a batch; all draw on the same random data.
struct Case {
  const char* name;
  std::function<metrics::MetricOp(int64_t begin, int64_t end)> make;
};

std::vector<Case> streaming_cases(int64_t n) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(0, 1);
  std::uniform_int_distribution<int64_t> klass(0, 3);
  std::vector<float> scores, probabilities, values, weights, targets;
  std::vector<int64_t> labels, binary, predicted_ids;
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < 4; ++c) scores.push_back(unit(rng));
    labels.push_back(klass(rng));
    predicted_ids.push_back(klass(rng));
    binary.push_back(unit(rng) < 0.5 ? 1 : 0);
    probabilities.push_back(unit(rng));
    values.push_back(unit(rng) * 10 - 5);
    targets.push_back(unit(rng) * 10 - 5);
    weights.push_back(static_cast<float>(klass(rng)));  // some zero weights too
  }
  Tensor s = f32(scores, {n, 4}), l = i64(labels), b = i64(binary), p = f32(probabilities),
         v = f32(values), t = f32(targets), w = f32(weights), ids = i64(predicted_ids);
  auto r = [](const Tensor& x, int64_t begin, int64_t end) { return rows(x, begin, end); };
  return {
      {"accuracy",
       [=](int64_t i, int64_t j) {
         return metrics::accuracy(r(l, i, j), r(ids, i, j), r(w, i, j));
       }},
      {"mean", [=](int64_t i, int64_t j) { return metrics::mean(r(v, i, j), r(w, i, j)); }},
      {"precision",
       [=](int64_t i, int64_t j) {
         return metrics::precision(r(b, i, j), r(ids, i, j), r(w, i, j));
       }},
      {"recall",
       [=](int64_t i, int64_t j) { return metrics::recall(r(b, i, j), r(ids, i, j), r(w, i, j)); }},
      {"auc",
       [=](int64_t i, int64_t j) { return metrics::auc(r(b, i, j), r(p, i, j), r(w, i, j)); }},
      {"auc_pr",
       [=](int64_t i, int64_t j) {
         return metrics::auc(r(b, i, j), r(p, i, j), r(w, i, j), 37, metrics::AucCurve::kPR,
                             metrics::AucSummation::kCarefulInterpolation);
       }},
      {"mse",
       [=](int64_t i, int64_t j) {
         return metrics::mean_squared_error(r(t, i, j), r(v, i, j), r(w, i, j));
       }},
      {"rmse", [=](int64_t i,
                   int64_t j) { return metrics::root_mean_squared_error(r(t, i, j), r(v, i, j)); }},
      {"mae",
       [=](int64_t i, int64_t j) {
         return metrics::mean_absolute_error(r(t, i, j), r(v, i, j), r(w, i, j));
       }},
      {"precision_at_k",
       [=](int64_t i, int64_t j) {
         return metrics::precision_at_k(r(l, i, j), r(s, i, j), 2, std::nullopt, r(w, i, j));
       }},
      {"recall_at_k",
       [=](int64_t i, int64_t j) { return metrics::recall_at_k(r(l, i, j), r(s, i, j), 2, 1); }},
      {"mean_iou",
       [=](int64_t i, int64_t j) {
         return metrics::mean_iou(r(l, i, j), r(ids, i, j), 4, r(w, i, j));
       }},
      {"mean_per_class_accuracy",
       [=](int64_t i, int64_t j) {
         return metrics::mean_per_class_accuracy(r(l, i, j), r(ids, i, j), 4);
       }},
  };
}

}  // namespace

TEST_CASE("streaming over batches equals one batch; merge order does not matter") {
  constexpr int64_t kExamples = 103;
  const std::vector<int64_t> bounds = {0, 1, 17, 50, 50, 64, 103};  // includes an empty batch
  for (const Case& c : streaming_cases(kExamples)) {
    std::string name = c.name;
    CAPTURE(name);
    double whole = c.make(0, kExamples).result();
    REQUIRE(std::isfinite(whole));

    std::vector<metrics::MetricOp> batches;
    for (size_t b = 0; b + 1 < bounds.size(); ++b)
      batches.push_back(c.make(bounds[b], bounds[b + 1]));
    // The Estimator's way: clone the first batch's, merge the rest.
    auto running = batches[0].metric->clone();
    for (size_t b = 1; b < batches.size(); ++b) running->merge(*batches[b].metric);
    CHECK(running->result() == Approx(whole).epsilon(1e-9));

    // Reverse order, starting from another batch.
    auto reversed = batches.back().metric->clone();
    for (size_t b = batches.size() - 1; b-- > 0;) reversed->merge(*batches[b].metric);
    CHECK(reversed->result() == Approx(whole).epsilon(1e-9));

    // The batches' own statistics were not touched by cloning and merging.
    CHECK(batches[0].result() == Approx(c.make(bounds[0], bounds[1]).result()).epsilon(1e-12));

    // reset: back to an empty stream, then it accumulates again.
    double empty = c.make(0, 0).result();
    running->reset();
    if (std::isnan(empty)) {
      CHECK(std::isnan(running->result()));
    } else {
      CHECK(running->result() == Approx(empty));
    }
    running->merge(*c.make(0, kExamples).metric);
    CHECK(running->result() == Approx(whole).epsilon(1e-9));
  }
}

TEST_CASE("metric errors name the metric and what was wrong") {
  std::string message = error_message<InvalidArgumentError>([] {
    metrics::accuracy(i64({1, 2, 3}), i64({1, 2}));
  });
  CHECK(contains(message, "accuracy"));
  CHECK(contains(message, "[3]"));
  CHECK(contains(message, "[2]"));

  message = error_message<InvalidArgumentError>([] {
    metrics::mean(f32({1, 2, 3, 4}, {2, 2}), f32({1, 2, 3}));
  });
  CHECK(contains(message, "mean"));
  CHECK(contains(message, "weights [3]"));

  message = error_message<InvalidArgumentError>([] {
    metrics::auc(i64({1, 0}), f32({0.5f, 1.5f}));
  });
  CHECK(contains(message, "auc"));
  CHECK(contains(message, "[0, 1]"));
  CHECK(contains(message, "element 1"));
  CHECK(contains(
      error_message<InvalidArgumentError>([] { metrics::auc(i64({1}), f32({0.5f}), {}, 1); }),
      "num_thresholds"));

  Tensor scores = f32({0.1f, 0.5f, 0.4f, 0.3f, 0.2f, 0.5f}, {2, 3});
  message = error_message<InvalidArgumentError>([&] {
    metrics::precision_at_k(i64({1, 0}), scores, 1, 3);
  });
  CHECK(contains(message, "precision_at_k"));
  CHECK(contains(message, "class_id 3"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   metrics::recall_at_k(i64({1, 0}), scores, 4);
                 }),
                 "k = 4"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   metrics::recall_at_k(i64({1, 0, 2}), scores, 1);
                 }),
                 "labels [3]"));

  message = error_message<InvalidArgumentError>([] {
    metrics::mean_iou(i64({0, 3}), i64({0, 1}), 3);
  });
  CHECK(contains(message, "mean_iou"));
  CHECK(contains(message, "class id 3"));
  CHECK(contains(message, "[0, 3)"));
  message = error_message<InvalidArgumentError>([] {
    metrics::mean_per_class_accuracy(i64({0, 1}), i64({0, -1}), 3);
  });
  CHECK(contains(message, "mean_per_class_accuracy"));
  CHECK(contains(message, "predictions element 1"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   metrics::mean_iou(f32({0, 1}), i64({0, 1}), 3);
                 }),
                 "integer class ids"));
  CHECK(
      contains(error_message<InvalidArgumentError>([] { metrics::mean(Tensor()); }), "undefined"));

  CHECK(contains(error_message<FailedPreconditionError>([] { metrics::MetricOp().result(); }),
                 "holds no metric"));

  // Merging different metrics or configurations.
  auto running = metrics::accuracy(i64({1}), i64({1})).metric->clone();
  message =
      error_message<InvalidArgumentError>([&] { running->merge(*metrics::mean(f32({1})).metric); });
  CHECK(contains(message, "'mean' into 'accuracy'"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { running->merge(*metrics::precision(i64({1}), i64({1})).metric); }),
                 "'precision' into 'accuracy'"));
  auto auc200 = metrics::auc(i64({1}), f32({0.5f})).metric->clone();
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { auc200->merge(*metrics::auc(i64({1}), f32({0.5f}), {}, 10).metric); }),
                 "10 thresholds"));
  auto at1 = metrics::precision_at_k(i64({1, 0}), scores, 1).metric->clone();
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   at1->merge(*metrics::precision_at_k(i64({1, 0}), scores, 2).metric);
                 }),
                 "k=2"));
  auto iou3 = metrics::mean_iou(i64({1}), i64({1}), 3).metric->clone();
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { iou3->merge(*metrics::mean_iou(i64({1}), i64({1}), 4).metric); }),
                 "4 classes"));
}
