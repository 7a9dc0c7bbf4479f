// Each head's loss, predictions and metrics against TF's formulas (head/*.py, v2), computed
// independently in reference.h: sigmoid / softmax cross-entropy and squared error per example,
// SUM_OVER_BATCH_SIZE and SUM reductions, weighted means, AUCs.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "estimator/canned/head.h"
#include "ops/error.h"
#include "tests/canned/reference.h"

using namespace est;
using namespace heads_reference;
using doctest::Approx;

namespace {

Tensor column(const std::vector<double>& v) {
  return Tensor::from_vector<double>(v, {int64_t(v.size()), 1});
}
double result(const MetricOps& ops, const std::string& key) {
  INFO("metric " << key);
  REQUIRE(ops.count(key));
  return ops.at(key).result();
}

// Scores at least one threshold bin (1/199) apart, none of them 0.5 exactly.
const std::vector<double> kLogits{-1.0, 0.5, 2.0, -0.3, 0.0, 1.2};
const std::vector<double> kLabels{0, 1, 0, 1, 1, 1};
const std::vector<double> kWeights{1.0, 2.0, 0.5, 1.0, 1.5, 3.0};

}  // namespace

TEST_CASE("binary_class_head: loss, SUM_OVER_BATCH_SIZE and SUM, with a weight column") {
  const Features features{{"w", Tensor::from_vector<double>(kWeights)}};
  double weighted_sum = 0;
  for (size_t i = 0; i < kLogits.size(); ++i)
    weighted_sum += kWeights[i] * sigmoid_cross_entropy(kLabels[i], kLogits[i]);
  auto v2 = canned::binary_class_head({.weight_column = "w"});
  CHECK(v2->loss(Tensor::from_vector<double>(kLabels), column(kLogits), features).item() ==
        Approx(weighted_sum / 6).epsilon(1e-12));
  auto v1 =
      canned::binary_class_head({.weight_column = "w", .loss_reduction = nn::Reduction::kSum});
  CHECK(v1->loss(column(kLabels), column(kLogits), features).item() ==
        Approx(weighted_sum).epsilon(1e-12));
  // Without weights every example counts once.
  double plain = 0;
  for (size_t i = 0; i < kLogits.size(); ++i)
    plain += sigmoid_cross_entropy(kLabels[i], kLogits[i]);
  CHECK(canned::binary_class_head()->loss(column(kLabels), column(kLogits)).item() ==
        Approx(plain / 6).epsilon(1e-12));
}

TEST_CASE("binary_class_head: predictions by TF's keys") {
  const Predictions p = canned::binary_class_head()->predictions(column(kLogits));
  const std::vector<double> logistic = p.at("logistic").to_vector<double>();
  const std::vector<double> probabilities = p.at("probabilities").to_vector<double>();
  CHECK(p.at("probabilities").shape() == Shape{6, 2});
  CHECK(p.at("class_ids").shape() == Shape{6, 1});
  CHECK(p.at("class_ids").dtype() == DType::kI64);
  CHECK(p.at("all_class_ids").to_vector<int32_t>() ==
        std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(p.at("logits").to_vector<double>() == kLogits);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    CHECK(logistic[i] == Approx(sigmoid(kLogits[i])));
    CHECK(probabilities[2 * i] == Approx(1 - sigmoid(kLogits[i])));
    CHECK(probabilities[2 * i + 1] == Approx(sigmoid(kLogits[i])));
  }
  // argmax([0, logit]): a logit of exactly 0 ties and takes class 0, as tf.argmax does.
  CHECK(p.at("class_ids").to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 0, 1});
  // base_head.py: `classes` the ids as decimal strings, `all_classes` every class's per example.
  CHECK(p.at("classes").dtype() == DType::kString);
  CHECK(p.at("classes").shape() == Shape{6, 1});
  CHECK(p.at("classes").to_vector<std::string>() ==
        std::vector<std::string>{"0", "1", "1", "0", "0", "1"});
  CHECK(p.at("all_classes").shape() == Shape{6, 2});
  CHECK(p.at("all_classes").to_vector<std::string>() ==
        std::vector<std::string>{"0", "1", "0", "1", "0", "1", "0", "1", "0", "1", "0", "1"});
  CHECK(p.size() == 7);
}

TEST_CASE("binary_class_head: metrics with weights, by TF's names") {
  const Features features{{"w", Tensor::from_vector<double>(kWeights)}};
  auto head = canned::binary_class_head({.weight_column = "w"});
  const MetricOps m =
      head->metrics(Tensor::from_vector<double>(kLabels), column(kLogits), features);
  std::vector<double> losses, logistic, correct;
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < kLogits.size(); ++i) {
    losses.push_back(sigmoid_cross_entropy(kLabels[i], kLogits[i]));
    logistic.push_back(sigmoid(kLogits[i]));
    const double predicted = kLogits[i] > 0 ? 1 : 0;
    correct.push_back(predicted == kLabels[i]);
    tp += kWeights[i] * (predicted == 1 && kLabels[i] == 1);
    fp += kWeights[i] * (predicted == 1 && kLabels[i] == 0);
    fn += kWeights[i] * (predicted == 0 && kLabels[i] == 1);
  }
  const double label_mean = weighted_mean(kLabels, kWeights);
  CHECK(result(m, "average_loss") == Approx(weighted_mean(losses, kWeights)).epsilon(1e-12));
  CHECK(result(m, "accuracy") == Approx(weighted_mean(correct, kWeights)));
  CHECK(result(m, "precision") == Approx(tp / (tp + fp)));
  CHECK(result(m, "recall") == Approx(tp / (tp + fn)));
  CHECK(result(m, "label/mean") == Approx(label_mean));
  CHECK(result(m, "prediction/mean") == Approx(weighted_mean(logistic, kWeights)));
  CHECK(result(m, "accuracy_baseline") == Approx(std::max(label_mean, 1 - label_mean)));
  CHECK(result(m, "auc") == Approx(roc_auc(kLabels, logistic, kWeights)).epsilon(1e-5));
  CHECK(result(m, "auc_precision_recall") ==
        Approx(pr_auc(kLabels, logistic, kWeights)).epsilon(1e-5));
  double weighted_sum = 0;
  for (size_t i = 0; i < losses.size(); ++i) weighted_sum += kWeights[i] * losses[i];
  CHECK(result(m, "loss") == Approx(weighted_sum / 6).epsilon(1e-12));
  CHECK(m.size() == 10);
}

TEST_CASE("binary_class_head: accuracy_baseline streams over batches as label/mean does") {
  auto head = canned::binary_class_head();
  MetricOps first = head->metrics(column({1, 1, 1}), column({0.3, -0.2, 1.0}));
  const MetricOps second =
      head->metrics(column({0, 0, 0, 0, 0}), column({0.1, 0.2, 0.3, 0.4, 0.5}));
  auto baseline = first.at("accuracy_baseline").metric->clone();
  baseline->merge(*second.at("accuracy_baseline").metric);
  CHECK(first.at("accuracy_baseline").result() == Approx(1.0));
  CHECK(baseline->result() == Approx(5.0 / 8));  // label mean 3/8 -> max(3/8, 5/8)
}

TEST_CASE("multi_class_head: softmax cross-entropy, predictions, accuracy, average_loss") {
  const std::vector<double> logits{1, 2, 0.5, 0.1, -1, 3, 2, 2, -1};
  const std::vector<double> weights{1, 2, 3};
  const std::vector<int64_t> labels{1, 0, 0};
  auto head = canned::multi_class_head(3, {.weight_column = "w"});
  const Features features{{"w", Tensor::from_vector<double>(weights)}};
  const Tensor logits_tensor = Tensor::from_vector<double>(logits, {3, 3});
  const Tensor labels_tensor = Tensor::from_vector<int64_t>(labels, {3, 1});
  std::vector<double> losses;
  for (int i = 0; i < 3; ++i) {
    double denominator = 0;
    for (int c = 0; c < 3; ++c) denominator += std::exp(logits[3 * i + c]);
    losses.push_back(std::log(denominator) - logits[3 * i + labels[i]]);
  }
  const double weighted_sum = 1 * losses[0] + 2 * losses[1] + 3 * losses[2];
  CHECK(head->loss(labels_tensor, logits_tensor, features).item() == Approx(weighted_sum / 3));
  auto v1 =
      canned::multi_class_head(3, {.weight_column = "w", .loss_reduction = nn::Reduction::kSum});
  CHECK(v1->loss(labels_tensor, logits_tensor, features).item() == Approx(weighted_sum));

  const Predictions p = head->predictions(logits_tensor);
  CHECK(p.at("class_ids").to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});  // tie: first
  CHECK(p.at("all_class_ids").shape() == Shape{3, 3});
  CHECK(p.at("probabilities").at({1, 2}) ==
        Approx(std::exp(3.0) / (std::exp(0.1) + std::exp(-1.0) + std::exp(3.0))));
  CHECK_FALSE(p.count("logistic"));
  CHECK(p.at("classes").to_vector<std::string>() == std::vector<std::string>{"1", "2", "0"});
  CHECK(p.at("all_classes").to_vector<std::string>() ==
        std::vector<std::string>{"0", "1", "2", "0", "1", "2", "0", "1", "2"});
  CHECK(p.size() == 6);

  const MetricOps m = head->metrics(labels_tensor, logits_tensor, features);
  CHECK(result(m, "accuracy") == Approx((1.0 + 3.0) / 6));
  CHECK(result(m, "average_loss") == Approx(weighted_sum / 6));
  CHECK(result(m, "loss") == Approx(weighted_sum / 3));
  CHECK(m.size() == 3);
}

TEST_CASE("regression_head: squared error per target, per-example weights broadcast") {
  const std::vector<double> logits{1, 2, 3, -1};
  const std::vector<double> labels{0.5, 2, 1, 1};
  const std::vector<double> weights{2, 1};
  auto head = canned::regression_head(2, {.weight_column = "w"});
  const Features features{{"w", Tensor::from_vector<double>(weights)}};
  const Tensor x = Tensor::from_vector<double>(logits, {2, 2});
  const Tensor y = Tensor::from_vector<int32_t>({0, 2, 1, 1}, {2, 2});  // ints are cast
  const Tensor y_float = Tensor::from_vector<double>(labels, {2, 2});
  const std::vector<double> broadcast{2, 2, 1, 1};
  double weighted_sum = 0;
  for (int i = 0; i < 4; ++i) weighted_sum += broadcast[i] * std::pow(logits[i] - labels[i], 2);
  CHECK(head->loss(y_float, x, features).item() == Approx(weighted_sum / 4));
  const MetricOps m = head->metrics(y_float, x, features);
  CHECK(result(m, "average_loss") == Approx(weighted_sum / 6));
  CHECK(result(m, "prediction/mean") == Approx(weighted_mean(logits, broadcast)));
  CHECK(result(m, "label/mean") == Approx(weighted_mean(labels, broadcast)));
  CHECK(result(m, "loss") == Approx(weighted_sum / 4));
  CHECK(canned::regression_head(2)->loss(y, x).item() == Approx((1 + 0 + 4 + 4) / 4.0));
  const Predictions p = head->predictions(x);
  CHECK(p.at("predictions").to_vector<double>() == logits);
  // regression_head.py adds `logits` only beside an inverse_link_fn.
  CHECK(p.size() == 1);
}

TEST_CASE("multi_label_head: sigmoid cross-entropy averaged over classes, AUCs over all pairs") {
  const std::vector<double> logits{1.0, -1.0, 0.2, -0.5, 2.0, 1.5};
  const std::vector<double> labels{1, 0, 1, 0, 1, 0};
  auto head = canned::multi_label_head(3);
  const Tensor x = Tensor::from_vector<double>(logits, {2, 3});
  const Tensor y = Tensor::from_vector<int64_t>({1, 0, 1, 0, 1, 0}, {2, 3});
  double row[2] = {0, 0};
  std::vector<double> probabilities;
  for (int i = 0; i < 6; ++i) {
    row[i / 3] += sigmoid_cross_entropy(labels[i], logits[i]) / 3;
    probabilities.push_back(sigmoid(logits[i]));
  }
  CHECK(head->loss(y, x).item() == Approx((row[0] + row[1]) / 2));
  const MetricOps m = head->metrics(y, x);
  const std::vector<double> ones(6, 1.0);
  CHECK(result(m, "average_loss") == Approx((row[0] + row[1]) / 2));
  CHECK(result(m, "auc") == Approx(roc_auc(labels, probabilities, ones)).epsilon(1e-5));
  CHECK(result(m, "auc_precision_recall") ==
        Approx(pr_auc(labels, probabilities, ones)).epsilon(1e-5));
  const Predictions p = head->predictions(x);
  CHECK(p.at("probabilities").to_vector<double>()[4] == Approx(sigmoid(2.0)));
  // multi_label_head.py: `classes` is every class's name per example; no ids.
  CHECK(p.at("classes").to_vector<std::string>() ==
        std::vector<std::string>{"0", "1", "2", "0", "1", "2"});
  CHECK(p.size() == 3);
}

TEST_CASE("heads reject what TF rejects, naming it") {
  CHECK_THROWS_AS(canned::multi_class_head(2), InvalidArgumentError);
  CHECK_THROWS_AS(canned::multi_label_head(1), InvalidArgumentError);
  CHECK_THROWS_AS(canned::regression_head(0), InvalidArgumentError);
  CHECK_THROWS_AS(canned::binary_class_head({.loss_reduction = nn::Reduction::kNone}),
                  InvalidArgumentError);
  auto binary = canned::binary_class_head();
  CHECK_THROWS_AS(binary->loss(column({0, 2}), column({0.1, 0.2})), InvalidArgumentError);
  CHECK_THROWS_AS(binary->loss(column({0, 1, 1}), column({0.1, 0.2})), InvalidArgumentError);
  CHECK_THROWS_AS(binary->loss(column({0, 1}), Tensor::zeros({2, 2}, DType::kF64)),
                  InvalidArgumentError);
  auto weighted = canned::binary_class_head({.weight_column = "w"});
  CHECK_THROWS_AS(weighted->loss(column({0, 1}), column({0.1, 0.2})), InvalidArgumentError);
  auto multi = canned::multi_class_head(3);
  CHECK_THROWS_AS(multi->loss(column({0, 1}), Tensor::zeros({2, 3}, DType::kF64)),
                  InvalidArgumentError);  // float labels
  CHECK_THROWS_AS(
      multi->loss(Tensor::from_vector<int64_t>({0, 3}), Tensor::zeros({2, 3}, DType::kF64)),
      InvalidArgumentError);  // id out of range
  auto multi_label = canned::multi_label_head(2);
  CHECK_THROWS_AS(multi_label->loss(Tensor::from_vector<int64_t>({0, 2}, {1, 2}),
                                    Tensor::zeros({1, 2}, DType::kF64)),
                  InvalidArgumentError);
}
