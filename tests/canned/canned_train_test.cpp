// Each canned estimator trains and evaluates on the synthetic problems of canned_test_util.h
// and must reach a sensible metric; its variables carry TF's names; bad arguments are errors
// naming what is wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "export/onnx_model.h"
#include "tests/canned/canned_test_util.h"

using namespace canned_test;
using est_test::TempDir;

namespace {

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("LinearClassifier learns the binary problem with TF's variable names") {
  TempDir dir;
  LinearClassifier classifier({.feature_columns = linear_columns(), .config = config(dir.str())});
  classifier.train(train_input(Task::kBinary), {.steps = 300});
  Metrics metrics = classifier.evaluate(eval_input(Task::kBinary));
  CHECK(metrics.at("accuracy") > 0.9);
  CHECK(metrics.at("auc") > 0.95);
  CHECK(metrics.at("global_step") == 300);
  const auto names = classifier.get_variable_names();
  CAPTURE(names.size());
  for (const char* name :
       {"linear/linear_model/x1/weights", "linear/linear_model/x2/weights",
        "linear/linear_model/color/weights", "linear/linear_model/bias_weights",
        "linear/linear_model/x1/weights/Ftrl", "linear/linear_model/x1/weights/Ftrl_1"})
    CHECK_MESSAGE(has(names, name), name);
  CHECK(classifier.get_variable_value("linear/linear_model/color/weights").shape() == Shape{3, 1});
}

TEST_CASE("LinearClassifier with three classes and LinearRegressor") {
  TempDir dir_classes, dir_regression;
  LinearClassifier classifier(
      {.feature_columns = linear_columns(), .n_classes = 3, .config = config(dir_classes.str())});
  classifier.train(train_input(Task::kThreeClasses), {.steps = 300});
  CHECK(classifier.evaluate(eval_input(Task::kThreeClasses)).at("accuracy") > 0.85);
  CHECK(classifier.get_variable_value("linear/linear_model/x1/weights").shape() == Shape{1, 3});

  LinearRegressor regressor({.feature_columns = linear_columns(),
                             .optimizer = "SGD",
                             .config = config(dir_regression.str())});
  regressor.train(train_input(Task::kRegression), {.steps = 300});
  Metrics metrics = regressor.evaluate(eval_input(Task::kRegression));
  CHECK(metrics.at("average_loss") < 0.05);  // the target's variance is about 18
  CHECK(regressor.get_variable_value("linear/linear_model/x2/weights").item() ==
        doctest::Approx(-3).epsilon(0.05));
}

TEST_CASE("DNNClassifier and DNNRegressor learn, with TF's variable names") {
  TempDir dir, dir_regression;
  DNNClassifier classifier(
      {.hidden_units = {16, 8}, .feature_columns = dnn_columns(), .config = config(dir.str())});
  classifier.train(train_input(Task::kBinary), {.steps = 400});
  CHECK(classifier.evaluate(eval_input(Task::kBinary)).at("accuracy") > 0.9);
  const auto names = classifier.get_variable_names();
  for (const char* name :
       {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_0/bias", "dnn/hiddenlayer_1/kernel",
        "dnn/logits/kernel", "dnn/logits/bias", "dnn/hiddenlayer_0/kernel/Adagrad",
        "dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights"})
    CHECK_MESSAGE(has(names, name), name);
  CHECK(classifier.get_variable_value("dnn/hiddenlayer_0/kernel").shape() == Shape{4, 16});
  CHECK(classifier.get_variable_value("dnn/logits/kernel").shape() == Shape{8, 1});

  DNNRegressor regressor({.hidden_units = {16},
                          .feature_columns = dnn_columns(),
                          .optimizer = "Adam",
                          .config = config(dir_regression.str())});
  regressor.train(train_input(Task::kRegression), {.steps = 400});
  CHECK(regressor.evaluate(eval_input(Task::kRegression)).at("average_loss") < 0.5);
  CHECK(has(regressor.get_variable_names(), "dnn/hiddenlayer_0/kernel/Adam"));
}

TEST_CASE("DNNClassifier with three classes, dropout and batch_norm") {
  TempDir dir;
  DNNClassifier classifier({.hidden_units = {16, 16},
                            .feature_columns = dnn_columns(),
                            .n_classes = 3,
                            .dropout = 0.1,
                            .config = config(dir.str()),
                            .batch_norm = true});
  classifier.train(train_input(Task::kThreeClasses), {.steps = 400});
  CHECK(classifier.evaluate(eval_input(Task::kThreeClasses)).at("accuracy") > 0.85);
  const auto names = classifier.get_variable_names();
  for (const char* name :
       {"dnn/hiddenlayer_0/batchnorm_0/gamma", "dnn/hiddenlayer_0/batchnorm_0/beta",
        "dnn/hiddenlayer_0/batchnorm_0/moving_mean",
        "dnn/hiddenlayer_1/batchnorm_1/moving_variance"})
    CHECK_MESSAGE(has(names, name), name);
  // The moving statistics moved away from their initial values while training.
  CHECK(classifier.get_variable_value("dnn/hiddenlayer_0/batchnorm_0/moving_mean")
            .to_vector<double>() != std::vector<double>(16, 0.0));
}

TEST_CASE("DNNLinearCombinedClassifier and Regressor: two parts, two optimizers, one step") {
  TempDir dir, dir_regression;
  DNNLinearCombinedClassifier classifier({.linear_feature_columns = linear_columns(),
                                          .linear_optimizer = optim::ftrl(0.1),
                                          .dnn_feature_columns = dnn_columns(),
                                          .dnn_optimizer = optim::adagrad(0.05),
                                          .dnn_hidden_units = {8},
                                          .config = config(dir.str())});
  classifier.train(train_input(Task::kBinary), {.steps = 300});
  Metrics metrics = classifier.evaluate(eval_input(Task::kBinary));
  CHECK(metrics.at("accuracy") > 0.9);
  CHECK(metrics.at("global_step") == 300);  // counted once per step, not once per optimizer
  const auto names = classifier.get_variable_names();
  for (const char* name : {"linear/linear_model/x1/weights/Ftrl", "dnn/hiddenlayer_0/kernel",
                           "dnn/hiddenlayer_0/kernel/Adagrad", "dnn/logits/bias/Adagrad"})
    CHECK_MESSAGE(has(names, name), name);
  // Each part got only its own optimizer's slots.
  CHECK_FALSE(has(names, "linear/linear_model/x1/weights/Adagrad"));
  CHECK_FALSE(has(names, "dnn/hiddenlayer_0/kernel/Ftrl"));

  DNNLinearCombinedRegressor regressor({.linear_feature_columns = linear_columns(),
                                        .linear_optimizer = optim::sgd(0.1),
                                        .dnn_feature_columns = dnn_columns(),
                                        .dnn_hidden_units = {8},
                                        .config = config(dir_regression.str())});
  regressor.train(train_input(Task::kRegression), {.steps = 300});
  CHECK(regressor.evaluate(eval_input(Task::kRegression)).at("average_loss") < 0.1);
}

TEST_CASE("BaselineClassifier and BaselineRegressor learn the label prior") {
  // The mean of the 512 training labels: what the baseline must predict for every example.
  auto label_mean = [](Task task) {
    std::optional<data::Element> all = synthetic(task, 512).batch(512).iterator().next();
    REQUIRE(all.has_value());
    const std::vector<double> labels = all->labels.to_vector<double>();
    double sum = 0;
    for (double label : labels) sum += label;
    return sum / double(labels.size());
  };
  TempDir dir, dir_regression;
  BaselineClassifier classifier({.config = config(dir.str())});
  classifier.train(train_input(Task::kBinary), {.steps = 300});
  Metrics metrics = classifier.evaluate(eval_input(Task::kBinary));
  CHECK(metrics.at("prediction/mean") == doctest::Approx(label_mean(Task::kBinary)).epsilon(0.02));
  std::string names;
  for (const std::string& name : classifier.get_variable_names()) names += name + " ";
  // Variables, then optimizer slots, as the checkpoint lists them.
  CHECK(names == "baseline/bias global_step baseline/bias/Ftrl baseline/bias/Ftrl_1 ");

  BaselineRegressor regressor({.config = config(dir_regression.str())});
  regressor.train(train_input(Task::kRegression), {.steps = 300});
  CHECK(regressor.get_variable_value("baseline/bias").item() ==
        doctest::Approx(label_mean(Task::kRegression)).epsilon(0.05));
}

TEST_CASE("canned estimators: bad arguments are errors naming them") {
  TempDir dir;
  CHECK_THROWS_AS(DNNClassifier({.feature_columns = dnn_columns(), .config = config(dir.str())}),
                  InvalidArgumentError);  // no hidden_units
  CHECK_THROWS_AS(
      LinearClassifier(
          {.feature_columns = linear_columns(), .n_classes = 1, .config = config(dir.str())}),
      InvalidArgumentError);
  CHECK_THROWS_WITH_AS(LinearRegressor({.feature_columns = linear_columns(),
                                        .optimizer = "Adadelta",
                                        .config = config(dir.str())}),
                       doctest::Contains("Unsupported optimizer name: 'Adadelta'"),
                       InvalidArgumentError);
  CHECK_THROWS_AS(LinearClassifier({.feature_columns = linear_columns(),
                                    .label_vocabulary = {"a", "b", "c"},
                                    .config = config(dir.str())}),
                  InvalidArgumentError);  // 3 entries for 2 classes
  CHECK_THROWS_AS(DNNLinearCombinedClassifier({.config = config(dir.str())}), InvalidArgumentError);
  CHECK_THROWS_AS(DNNLinearCombinedClassifier(
                      {.dnn_feature_columns = dnn_columns(), .config = config(dir.str())}),
                  InvalidArgumentError);  // no dnn_hidden_units
}

TEST_CASE("optimizer names map to TF1's optimizers with the estimator's learning rate") {
  const std::pair<const char*, const char*> kNames[] = {{"Adagrad", "Adagrad"},
                                                        {"Adam", "Adam"},
                                                        {"Ftrl", "Ftrl"},
                                                        {"RMSProp", "RMSProp"},
                                                        {"SGD", "GradientDescent"}};
  for (auto [name, optimizer] : kNames) {
    CAPTURE(name);
    optim::Optimizer made = canned::get_optimizer_instance(std::string(name), 0.125);
    CHECK(made.name() == optimizer);
    CHECK(made.learning_rate().at(0) == 0.125);
  }
  // An optimizer given as an object is used as it is.
  CHECK(canned::get_optimizer_instance(optim::adam(0.5), 0.125).learning_rate().at(0) == 0.5);
}

TEST_CASE("a DNNClassifier over numeric columns exports for serving, binary and 3 classes") {
  const std::vector<float> x1{0.5f, -1.0f, 1.5f}, x2{-0.2f, 0.3f, 1.0f};
  InputFn three = [&](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(
               {{"x1", Tensor::from_vector(x1)}, {"x2", Tensor::from_vector(x2)}})
        .batch(3);
  };
  for (int64_t n_classes : {2, 3}) {
    CAPTURE(n_classes);
    TempDir dir;
    DNNClassifier classifier(
        {.hidden_units = {4},
         .feature_columns = {fc::numeric_column("x1"), fc::numeric_column("x2")},
         .n_classes = n_classes,
         .config = config(dir.str())});
    classifier.train(train_input(n_classes == 2 ? Task::kBinary : Task::kThreeClasses),
                     {.steps = 20});
    const std::string exported = classifier.export_saved_model(
        dir / "export", build_raw_serving_input_receiver_fn({{"x1", {{-1}}}, {"x2", {{-1}}}}));
    // The exported graph, run on its own, predicts what the estimator predicts.
    serving::OnnxModel model = serving::OnnxModel::load(exported + "/model.onnx");
    serving::NamedTensors outputs =
        model.run({{"x1", Tensor::from_vector(x1, {3})}, {"x2", Tensor::from_vector(x2, {3})}});
    std::vector<Predictions> expected = classifier.predict(three);
    REQUIRE(expected.size() == 3);
    REQUIRE(outputs.count("probabilities") == 1);
    REQUIRE(outputs.count("all_class_ids") == 1);
    REQUIRE(outputs.count("classes") == 1);
    REQUIRE(outputs.count("all_classes") == 1);
    const std::vector<double> probabilities = outputs.at("probabilities").to_vector<double>();
    const std::vector<double> ids = outputs.at("all_class_ids").to_vector<double>();
    const std::vector<std::string> classes = outputs.at("classes").to_vector<std::string>();
    const std::vector<std::string> all_classes = outputs.at("all_classes").to_vector<std::string>();
    for (size_t i = 0; i < 3; ++i) {
      // TF's keys: `classes` the class id's decimal string, `all_classes` every class's.
      const std::string id = std::to_string(expected[i].at("class_ids").to_vector<int64_t>().at(0));
      CHECK(expected[i].at("classes").to_vector<std::string>() == std::vector<std::string>{id});
      CHECK(classes.at(i) == id);
      const std::vector<double> want = expected[i].at("probabilities").to_vector<double>();
      for (size_t k = 0; k < want.size(); ++k) {
        CHECK(probabilities.at(i * want.size() + k) == doctest::Approx(want[k]).epsilon(1e-5));
        CHECK(ids.at(i * want.size() + k) == double(k));
        CHECK(all_classes.at(i * want.size() + k) == std::to_string(k));
      }
    }
  }
}
TEST_CASE("a classifier with label_vocabulary exports its string classes") {
  TempDir dir;
  DNNClassifier classifier({.hidden_units = {4},
                            .feature_columns = {fc::numeric_column("x1"), fc::numeric_column("x2")},
                            .label_vocabulary = {"no", "yes"},
                            .config = config(dir.str())});
  classifier.train(train_input(Task::kStringBinary), {.steps = 20});
  const std::string exported = classifier.export_saved_model(
      dir / "export", build_raw_serving_input_receiver_fn({{"x1", {{-1}}}, {"x2", {{-1}}}}));
  // TF's index_to_string lookup, in the graph: the served classes are predict's strings.
  const std::vector<float> x1{1.5f, -1.0f, 0.5f, -2.0f}, x2{1.0f, -0.3f, -0.2f, 0.5f};
  serving::NamedTensors outputs =
      serving::OnnxModel::load(exported + "/model.onnx")
          .run({{"x1", Tensor::from_vector(x1, {4})}, {"x2", Tensor::from_vector(x2, {4})}});
  std::vector<Predictions> expected = classifier.predict([&](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(
               {{"x1", Tensor::from_vector(x1)}, {"x2", Tensor::from_vector(x2)}})
        .batch(4);
  });
  REQUIRE(expected.size() == 4);
  const std::vector<std::string> classes = outputs.at("classes").to_vector<std::string>();
  const std::vector<std::string> all_classes = outputs.at("all_classes").to_vector<std::string>();
  REQUIRE(classes.size() == 4);
  REQUIRE(all_classes.size() == 8);
  std::set<std::string> seen;
  for (size_t i = 0; i < 4; ++i) {
    CHECK(classes[i] == expected[i].at("classes").to_vector<std::string>().at(0));
    CHECK(classes[i] == (expected[i].at("class_ids").to_vector<int64_t>().at(0) ? "yes" : "no"));
    CHECK(all_classes[2 * i] == "no");
    CHECK(all_classes[2 * i + 1] == "yes");
    seen.insert(classes[i]);
  }
  CHECK(seen.size() == 2);  // the probe reaches both labels
}
