// Losses against values computed here from their textbook definitions, every reduction, TF1's
// default reduction (SUM_BY_NONZERO_WEIGHTS: divided by the count of non-zero weights) with
// zero weights for every loss, and the per-thread record of the last reduction used.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "nn/losses.h"
#include "ops/autograd.h"
#include "ops/math.h"

using namespace est;
using namespace est::nn;
using doctest::Approx;

namespace {

// -log(softmax(logits)[label]) from the definition.
double cross_entropy(const std::vector<double>& logits, size_t label) {
  double total = 0;
  for (double z : logits) total += std::exp(z);
  return -std::log(std::exp(logits[label]) / total);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("sparse_softmax_cross_entropy and each reduction") {
  Tensor logits = Tensor::from_vector<double>({1, 2, 3, 1, 1, 1, 0, -4, 2}, {3, 3});
  Tensor labels = Tensor::from_vector<int64_t>({2, 0, 1});
  double l0 = cross_entropy({1, 2, 3}, 2);
  double l1 = cross_entropy({1, 1, 1}, 0);  // log 3
  double l2 = cross_entropy({0, -4, 2}, 1);
  CHECK(l1 == Approx(std::log(3.0)));

  Tensor none = sparse_softmax_cross_entropy(labels, logits, 1.0, Reduction::kNone);
  CHECK(none.shape() == Shape{3});
  CHECK(none.at({0}) == Approx(l0));
  CHECK(none.at({1}) == Approx(l1));
  CHECK(none.at({2}) == Approx(l2));

  Tensor mean = sparse_softmax_cross_entropy(labels, logits);  // SUM_BY_NONZERO_WEIGHTS
  CHECK(mean.numel() == 1);
  CHECK(mean.item() == Approx((l0 + l1 + l2) / 3));
  CHECK(sparse_softmax_cross_entropy(labels, logits, 1.0, Reduction::kSum).item() ==
        Approx(l0 + l1 + l2));
  CHECK(sparse_softmax_cross_entropy(labels, logits, 2.0, Reduction::kSumOverBatchSize).item() ==
        Approx(2 * (l0 + l1 + l2) / 3));
  CHECK(sparse_softmax_cross_entropy(labels, logits, 2.0, Reduction::kMean).item() ==
        Approx((l0 + l1 + l2) / 3));

  Tensor weights = Tensor::from_vector<double>({1, 3, 0});
  CHECK(sparse_softmax_cross_entropy(labels, logits, weights, Reduction::kMean).item() ==
        Approx((l0 + 3 * l1) / 4));
  CHECK(sparse_softmax_cross_entropy(labels, logits, weights, Reduction::kSumByNonzeroWeights)
            .item() == Approx((l0 + 3 * l1) / 2));
  CHECK(
      sparse_softmax_cross_entropy(labels, logits, weights, Reduction::kSumOverBatchSize).item() ==
      Approx((l0 + 3 * l1) / 3));
  Tensor weighted_none = sparse_softmax_cross_entropy(labels, logits, weights, Reduction::kNone);
  CHECK(weighted_none.at({1}) == Approx(3 * l1));
  CHECK(weighted_none.at({2}) == 0.0);

  // All weights zero: 0, not NaN (tf.math.div_no_nan).
  Tensor zero_weights = Tensor::zeros({3}, DType::kF64);
  CHECK(sparse_softmax_cross_entropy(labels, logits, zero_weights, Reduction::kMean).item() == 0.0);
  CHECK(sparse_softmax_cross_entropy(labels, logits, 0.0, Reduction::kSumByNonzeroWeights).item() ==
        0.0);

  // [N, 1] labels are accepted as Keras accepts them.
  CHECK(sparse_softmax_cross_entropy(labels.reshape({3, 1}), logits).item() ==
        Approx((l0 + l1 + l2) / 3));
}

TEST_CASE("sparse_softmax_cross_entropy rejects bad labels with a clear error") {
  Tensor logits = Tensor::zeros({2, 3});
  CHECK_THROWS_AS(sparse_softmax_cross_entropy(Tensor::zeros({2}), logits), InvalidArgumentError);
  CHECK_THROWS_AS(sparse_softmax_cross_entropy(Tensor::zeros({3}, DType::kI32), logits),
                  InvalidArgumentError);
  CHECK_THROWS_AS(sparse_softmax_cross_entropy(Tensor::zeros({2}, DType::kI32), Tensor::zeros({6})),
                  InvalidArgumentError);
  CHECK_THROWS_AS(
      sparse_softmax_cross_entropy(Tensor::zeros({2}, DType::kI32), logits, Tensor::ones({3})),
      InvalidArgumentError);
}

TEST_CASE("softmax_cross_entropy with probability labels and label smoothing") {
  Tensor logits = Tensor::from_vector<double>({1, 2, 3, 0, 0, 1}, {2, 3});
  Tensor labels = Tensor::from_vector<double>({0, 0, 1, 0.5, 0.5, 0}, {2, 3});
  double l0 = cross_entropy({1, 2, 3}, 2);
  double l1 = 0.5 * cross_entropy({0, 0, 1}, 0) + 0.5 * cross_entropy({0, 0, 1}, 1);
  CHECK(softmax_cross_entropy(labels, logits).item() == Approx((l0 + l1) / 2));
  CHECK(softmax_cross_entropy(labels, logits, 1.0, 0.0, Reduction::kSum).item() == Approx(l0 + l1));
  // Smoothing 0.3 over 3 classes: labels * 0.7 + 0.1.
  double s0 = 0.1 * cross_entropy({1, 2, 3}, 0) + 0.1 * cross_entropy({1, 2, 3}, 1) +
              0.8 * cross_entropy({1, 2, 3}, 2);
  Tensor smoothed = softmax_cross_entropy(labels, logits, 1.0, 0.3, Reduction::kNone);
  CHECK(smoothed.at({0}) == Approx(s0));
  // Integer one-hot labels are cast to the logits' dtype.
  Tensor int_labels = Tensor::from_vector<int32_t>({0, 0, 1, 1, 0, 0}, {2, 3});
  CHECK(softmax_cross_entropy(int_labels, logits, 1.0, 0.0, Reduction::kNone).at({1}) ==
        Approx(cross_entropy({0, 0, 1}, 0)));
  CHECK_THROWS_AS(softmax_cross_entropy(Tensor::zeros({2, 2}, DType::kF64), logits),
                  InvalidArgumentError);
}

TEST_CASE("sigmoid_cross_entropy is elementwise and averages over every element") {
  std::vector<double> x{-2, 0.5, 3, 0};
  std::vector<double> z{0, 1, 1, 0.25};
  Tensor logits = Tensor::from_vector<double>(x, {2, 2});
  Tensor labels = Tensor::from_vector<double>(z, {2, 2});
  double total = 0;
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    double l = -z[i] * std::log(sigmoid(x[i])) - (1 - z[i]) * std::log(1 - sigmoid(x[i]));
    expected.push_back(l);
    total += l;
  }
  Tensor none = sigmoid_cross_entropy(labels, logits, 1.0, 0.0, Reduction::kNone);
  CHECK(none.at({0, 1}) == Approx(expected[1]));
  CHECK(none.at({1, 1}) == Approx(expected[3]));
  CHECK(sigmoid_cross_entropy(labels, logits).item() == Approx(total / 4));
  // Per-row weights [2, 1] broadcast over the columns.
  Tensor row_weights = Tensor::from_vector<double>({1, 0}, {2, 1});
  CHECK(sigmoid_cross_entropy(labels, logits, row_weights, 0.0, Reduction::kSumByNonzeroWeights)
            .item() == Approx((expected[0] + expected[1]) / 2));
  // Smoothing 0.2: z * 0.8 + 0.1.
  double zs = 1 * 0.8 + 0.1;
  double smoothed = -zs * std::log(sigmoid(3)) - (1 - zs) * std::log(1 - sigmoid(3));
  CHECK(sigmoid_cross_entropy(labels, logits, 1.0, 0.2, Reduction::kNone).at({1, 0}) ==
        Approx(smoothed));
}

TEST_CASE("mean_squared_error") {
  Tensor labels = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor predictions = Tensor::from_vector<float>({1.5f, 2, 1, 4}, {2, 2});
  // Squared errors 0.25, 0, 4, 0.
  CHECK(mean_squared_error(labels, predictions).item() == Approx(4.25 / 4));
  CHECK(mean_squared_error(labels, predictions, 1.0, Reduction::kSum).item() == Approx(4.25));
  Tensor none = mean_squared_error(labels, predictions, 1.0, Reduction::kNone);
  CHECK(none.at({1, 0}) == Approx(4.0));
  Tensor weights = Tensor::from_vector<float>({2, 0}, {2, 1});
  CHECK(mean_squared_error(labels, predictions, weights, Reduction::kMean).item() ==
        Approx(0.5 / 4));
  CHECK_THROWS_AS(mean_squared_error(Tensor::zeros({4}), predictions), InvalidArgumentError);
  CHECK_THROWS_AS(mean_squared_error(labels, predictions, Tensor::ones({3})), InvalidArgumentError);
}

TEST_CASE("huber is quadratic inside delta and linear outside") {
  Tensor labels = Tensor::from_vector<double>({0, 0, 0, 0});
  Tensor predictions = Tensor::from_vector<double>({0.5, -2, 3, 1});
  // delta 1: 0.125, 1.5, 2.5, 0.5.
  Tensor none = huber(labels, predictions, 1.0, 1.0, Reduction::kNone);
  CHECK(none.at({0}) == Approx(0.125));
  CHECK(none.at({1}) == Approx(1.5));
  CHECK(none.at({2}) == Approx(2.5));
  CHECK(none.at({3}) == Approx(0.5));
  CHECK(huber(labels, predictions).item() == Approx(4.625 / 4));
  // delta 2: 0.125, 2, 2 * (3 - 1) = 4, 0.5.
  CHECK(huber(labels, predictions, 1.0, 2.0, Reduction::kSum).item() == Approx(6.625));
  CHECK_THROWS_AS(huber(labels, predictions, 1.0, 0.0), InvalidArgumentError);
}

TEST_CASE("every loss defaults to TF1's SUM_BY_NONZERO_WEIGHTS, not Keras's batch mean") {
  // With a zero weight the two differ: TF1 divides the weighted sum by the number of non-zero
  // (broadcast) weights, Keras's SUM_OVER_BATCH_SIZE by the number of loss elements.
  Tensor logits = Tensor::from_vector<double>({1, 2, 3, 1, 1, 1, 0, -4, 2}, {3, 3});
  Tensor labels = Tensor::from_vector<int64_t>({2, 0, 1});
  Tensor weights = Tensor::from_vector<double>({2, 0, 1});
  double l0 = cross_entropy({1, 2, 3}, 2), l2 = cross_entropy({0, -4, 2}, 1);
  CHECK(sparse_softmax_cross_entropy(labels, logits, weights).item() == Approx((2 * l0 + l2) / 2));
  CHECK(
      sparse_softmax_cross_entropy(labels, logits, weights, Reduction::kSumOverBatchSize).item() ==
      Approx((2 * l0 + l2) / 3));

  Tensor onehot = Tensor::from_vector<double>({0, 0, 1, 1, 0, 0, 0, 1, 0}, {3, 3});
  CHECK(softmax_cross_entropy(onehot, logits, weights).item() == Approx((2 * l0 + l2) / 2));

  // Elementwise losses [2, 2] with row weights [[3], [0]]: two non-zero broadcast weights.
  Tensor row_weights = Tensor::from_vector<double>({3, 0}, {2, 1});
  Tensor labels4 = Tensor::from_vector<double>({0, 1, 1, 0}, {2, 2});
  Tensor predictions = Tensor::from_vector<double>({0.5, -1, 4, 2}, {2, 2});
  // Squared errors of row 0: 0.25 and 4.
  CHECK(mean_squared_error(labels4, predictions, row_weights).item() == Approx(3 * (0.25 + 4) / 2));
  // Huber (delta 1) of row 0: 0.125 and 2 - 0.5 = 1.5.
  CHECK(huber(labels4, predictions, row_weights).item() == Approx(3 * (0.125 + 1.5) / 2));
  // Sigmoid cross entropy of row 0: logits 0.5 (label 0) and -1 (label 1).
  double s0 = -std::log(1 - sigmoid(0.5)), s1 = -std::log(sigmoid(-1));
  CHECK(sigmoid_cross_entropy(labels4, predictions, row_weights).item() ==
        Approx(3 * (s0 + s1) / 2));
  CHECK(compute_weighted_loss(predictions, row_weights).item() == Approx(3 * (0.5 - 1) / 2));
  // A scalar weight 0: nothing is present, the loss is 0.
  CHECK(mean_squared_error(labels4, predictions, 0.0).item() == 0.0);
}

TEST_CASE("losses pass gradients to the predictions") {
  Tensor predictions = Tensor::from_vector<double>({1, 3}).set_requires_grad(true);
  Tensor labels = Tensor::from_vector<double>({0, 1});
  // d/dp mean((p - y)^2) = (p - y) for two elements.
  auto grads = ops::gradients(mean_squared_error(labels, predictions), {predictions});
  CHECK(grads[0].at({0}) == Approx(1.0));
  CHECK(grads[0].at({1}) == Approx(2.0));
}

TEST_CASE("a loss carries the reduction its loss function applied") {
  Tensor labels = Tensor::from_vector<int64_t>({0, 1});
  Tensor logits = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).set_requires_grad(true);
  // No loss function: TF's default (its graph starts with None, which counts as a mean).
  CHECK(loss_reduction(ops::sum(logits)) == Reduction::kSumByNonzeroWeights);
  CHECK(loss_reduction(Tensor()) == Reduction::kSumByNonzeroWeights);
  Tensor over_batch =
      sparse_softmax_cross_entropy(labels, logits, 1.0, Reduction::kSumOverBatchSize);
  CHECK(loss_reduction(over_batch) == Reduction::kSumOverBatchSize);
  CHECK(loss_reduction(sparse_softmax_cross_entropy(labels, logits)) ==
        Reduction::kSumByNonzeroWeights);
  Tensor sum = mean_squared_error(logits, ops::mul(logits, 2.0), 1.0, Reduction::kSum);
  CHECK(loss_reduction(sum) == Reduction::kSum);
  Tensor none = huber(logits, ops::mul(logits, 2.0), 1.0, 1.0, Reduction::kNone);
  CHECK(loss_reduction(none) == Reduction::kNone);
  CHECK(loss_reduction(compute_weighted_loss(logits, 1.0, Reduction::kMean)) == Reduction::kMean);
  CHECK(loss_reduction(sigmoid_cross_entropy(ops::mul(logits, 0.0), logits, 1.0, 0.0,
                                             Reduction::kSum)) == Reduction::kSum);
  // A later loss does not change an earlier one's (the reduction is the loss's, not the
  // thread's), and every thread reads the same.
  CHECK(loss_reduction(over_batch) == Reduction::kSumOverBatchSize);
  Reduction elsewhere = Reduction::kNone;
  std::thread([&] { elsewhere = loss_reduction(sum); }).join();
  CHECK(elsewhere == Reduction::kSum);
  // A loss computed from a loss function's result has its reduction: the multi-worker
  // tutorial's reduce_sum(NONE losses) / global batch, a loss plus a regularizer.
  CHECK(loss_reduction(ops::mul(ops::sum(none), 0.25)) == Reduction::kNone);
  CHECK(loss_reduction(ops::add(sum, ops::sum(ops::mul(logits, logits)))) == Reduction::kSum);
  // Without a gradient there is no graph to record it on: the default.
  {
    ops::NoGradGuard no_grad;
    CHECK(loss_reduction(mean_squared_error(logits, logits, 1.0, Reduction::kSum)) ==
          Reduction::kSumByNonzeroWeights);
  }

  // TF's get_loss_reduction: only SUM is a sum; NONE counts as a mean (the user reduced it).
  CHECK(is_mean_reduction(Reduction::kNone));
  CHECK_FALSE(is_mean_reduction(Reduction::kSum));
  CHECK(is_mean_reduction(Reduction::kMean));
  CHECK(is_mean_reduction(Reduction::kSumOverBatchSize));
  CHECK(is_mean_reduction(Reduction::kSumByNonzeroWeights));
}
