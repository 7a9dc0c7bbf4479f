// Heads inside model_fn: the EstimatorSpec per mode, and an Estimator that trains a linear
// binary classifier with Ftrl through binary_class_head and evaluates it under TF's metric
// names (the shape of a canned LinearClassifier, without feature columns).
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "estimator/canned/head.h"
#include "estimator/estimator.h"
#include "nn/layers_dense.h"
#include "nn/optimizers.h"

using namespace est;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "est_canned_test_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Label 1 when x0 + 2 x1 > 0.3, from a fixed pseudo-random grid of points.
InputFn separable_input(int64_t examples, int64_t batch) {
  return [=](ModeKeys, const InputContext*) {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t i = 0; i < examples; ++i) {
      const float a = std::sin(float(i) * 1.7f), b = std::cos(float(i) * 2.3f);
      x.push_back(a);
      x.push_back(b);
      y.push_back(a + 2 * b > 0.3f ? 1 : 0);
    }
    auto ds = data::Dataset::from_tensor_slices(
        Features{{"x", Tensor::from_vector<float>(x, {examples, 2})}},
        Tensor::from_vector<int64_t>(y, {examples, 1}));
    return ds.batch(batch);
  };
}

EstimatorSpec linear_binary_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                                     nn::ModelContext& ctx) {
  Tensor logits = nn::dense(ctx, features.at("x"), {.units = 1});
  return canned::binary_class_head()->create_estimator_spec(features, mode, logits, labels, ctx,
                                                            optim::ftrl(0.5));
}

}  // namespace

TEST_CASE("create_estimator_spec: TRAIN minimizes, EVAL has metrics, PREDICT predictions") {
  nn::VariableStore store;
  nn::ModelContext ctx(store, nn::Mode::kTrain, 1);
  auto head = canned::multi_class_head(3);
  const Features features{{"x", Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2})}};
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2}, {3, 1});
  const auto logits_of = [&] {
    ctx.begin_call();
    return nn::dense(ctx, features.at("x"), {.units = 3});
  };
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 30; ++step) {
    EstimatorSpec spec = head->create_estimator_spec(features, ModeKeys::kTrain, logits_of(),
                                                     labels, ctx, optim::sgd(0.5));
    REQUIRE(spec.train_op.defined());
    CHECK(spec.predictions.count("probabilities"));
    (step == 0 ? first_loss : last_loss) = spec.loss.item();
    spec.train_op.run();
  }
  CHECK(last_loss < first_loss / 2);
  // The train op carries the head's loss_reduction, which a strategy reads to scale gradients.
  ctx.begin_call();
  CHECK(head->create_estimator_spec(features, ModeKeys::kTrain, logits_of(), labels, ctx,
                                    optim::sgd(0.5))
            .train_op.loss_reduction() == nn::Reduction::kSumOverBatchSize);
  CHECK(canned::multi_class_head(3, {.loss_reduction = nn::Reduction::kSum})
            ->create_estimator_spec(features, ModeKeys::kTrain, logits_of(), labels, ctx,
                                    optim::sgd(0.5))
            .train_op.loss_reduction() == nn::Reduction::kSum);
  CHECK_THROWS_AS(head->create_estimator_spec(features, ModeKeys::kTrain, logits_of(), labels, ctx),
                  InvalidArgumentError);  // no optimizer

  ctx.set_mode(nn::Mode::kEval);
  EstimatorSpec eval =
      head->create_estimator_spec(features, ModeKeys::kEval, logits_of(), labels, ctx);
  CHECK_FALSE(eval.train_op.defined());
  CHECK(eval.eval_metric_ops.count("accuracy"));
  CHECK(eval.eval_metric_ops.at("loss").result() == doctest::Approx(eval.loss.item()));
  CHECK_THROWS_AS(
      head->create_estimator_spec(features, ModeKeys::kEval, logits_of(), Tensor(), ctx),
      InvalidArgumentError);  // labels required

  EstimatorSpec predict =
      head->create_estimator_spec(features, ModeKeys::kPredict, logits_of(), Tensor(), ctx);
  // multi_class_head.py: logits, probabilities, class_ids, classes, all_class_ids, all_classes.
  CHECK(predict.predictions.size() == 6);
  CHECK_FALSE(predict.loss.defined());
}

// TF's heads' PREDICT export_outputs (binary_class_head.py, multi_class_head.py,
// regression_head.py): the signatures by name, their methods, and the classification's classes
// (every class's decimal name per example) and scores (the probabilities).
TEST_CASE("create_estimator_spec: PREDICT has TF's export_outputs for each head") {
  nn::VariableStore store;
  nn::ModelContext ctx(store, nn::Mode::kPredict, 1);
  const Tensor logits3 = Tensor::from_vector<float>({1, 0, -1, 0.5f, 2, 0}, {2, 3});
  const Tensor logits1 = Tensor::from_vector<float>({0.3f, -2}, {2, 1});
  using Method = ExportOutput::Method;
  auto methods = [](const EstimatorSpec& spec) {
    std::map<std::string, Method> out;
    for (const auto& [name, output] : spec.export_outputs) out.emplace(name, output.method());
    return out;
  };

  const EstimatorSpec multi = canned::multi_class_head(3)->create_estimator_spec(
      {}, ModeKeys::kPredict, logits3, Tensor(), ctx);
  CHECK(methods(multi) == std::map<std::string, Method>{{"classification", Method::kClassify},
                                                        {"predict", Method::kPredict},
                                                        {"serving_default", Method::kClassify}});
  const auto& classify = multi.export_outputs.at("serving_default").outputs();
  CHECK(classify.at("classes").dtype() == DType::kString);
  CHECK(classify.at("classes").shape() == Shape{2, 3});
  CHECK(classify.at("classes").to_vector<std::string>() ==
        std::vector<std::string>{"0", "1", "2", "0", "1", "2"});
  CHECK(classify.at("scores").to_vector<float>() ==
        multi.predictions.at("probabilities").to_vector<float>());
  CHECK(multi.export_outputs.at("predict").outputs().size() == multi.predictions.size());

  const EstimatorSpec binary = canned::binary_class_head()->create_estimator_spec(
      {}, ModeKeys::kPredict, logits1, Tensor(), ctx);
  CHECK(methods(binary) == std::map<std::string, Method>{{"classification", Method::kClassify},
                                                         {"predict", Method::kPredict},
                                                         {"regression", Method::kRegress},
                                                         {"serving_default", Method::kClassify}});
  CHECK(
      binary.export_outputs.at("classification").outputs().at("classes").to_vector<std::string>() ==
      std::vector<std::string>{"0", "1", "0", "1"});
  CHECK(binary.export_outputs.at("regression").outputs().at("outputs").to_vector<float>() ==
        binary.predictions.at("logistic").to_vector<float>());

  const EstimatorSpec regression = canned::regression_head()->create_estimator_spec(
      {}, ModeKeys::kPredict, logits1, Tensor(), ctx);
  CHECK(methods(regression) ==
        std::map<std::string, Method>{{"predict", Method::kPredict},
                                      {"regression", Method::kRegress},
                                      {"serving_default", Method::kRegress}});
  CHECK(
      regression.export_outputs.at("serving_default").outputs().at("outputs").to_vector<float>() ==
      std::vector<float>{0.3f, -2});
}

TEST_CASE("an Estimator trains a linear binary classifier with Ftrl through the head") {
  TempDir dir;
  Estimator estimator(linear_binary_model_fn, RunConfig{.model_dir = dir.str(),
                                                        .tf_random_seed = 3,
                                                        .save_summary_steps = 0,
                                                        .log_step_count_steps = 1000});
  estimator.train(separable_input(256, 32));  // 8 steps, to the end of the input
  CHECK(estimator.get_variable_value("dense/kernel/Ftrl").shape() == Shape{2, 1});
  const Metrics metrics = estimator.evaluate(separable_input(256, 64));
  for (const char* key :
       {"accuracy", "auc", "auc_precision_recall", "precision", "recall", "average_loss",
        "label/mean", "prediction/mean", "accuracy_baseline", "loss", "global_step"}) {
    INFO(key);
    CHECK(metrics.count(key));
  }
  MESSAGE("accuracy " << metrics.at("accuracy") << ", auc " << metrics.at("auc"));
  CHECK(metrics.at("accuracy") > 0.9);
  CHECK(metrics.at("auc") > 0.95);
  CHECK(metrics.at("accuracy") > metrics.at("accuracy_baseline"));
  const std::vector<Predictions> predictions = estimator.predict(separable_input(8, 4));
  REQUIRE(predictions.size() == 8);
  CHECK(predictions[0].count("logistic"));
}
