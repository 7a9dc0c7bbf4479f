// One training step of the canned estimators checked by hand against TF1's update formulas on
// tiny inputs (so the default optimizers and learning rates are TF's): Ftrl for the linear
// models (FtrlOptimizer: from zero weights, w = -g lr / sqrt(0.1 + g^2)), Adagrad for the DNN
// (accum = 0.1 + g^2, w -= lr g / sqrt(accum)) with the gradients of a one-hidden-layer relu
// net worked out by hand from the step-0 checkpoint; the loss reductions of the v2 and v1
// classes; the weight column; and label_vocabulary's string labels and classes.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <tuple>

#include "checkpoint/reader.h"
#include "tests/canned/canned_test_util.h"

using namespace canned_test;
using doctest::Approx;
using est_test::TempDir;

namespace {

// One batch of two examples, x0 = {1, 2}, labels {1, 3}; x1 ... x<extra> are zeros.
InputFn tiny_input(int extra_columns = 0, bool weighted = false) {
  return [=](ModeKeys, const InputContext*) {
    Features features{{"x0", Tensor::from_vector<float>({1, 2})}};
    for (int i = 1; i <= extra_columns; ++i)
      features[fmt::format("x{}", i)] = Tensor::from_vector<float>({0, 0});
    if (weighted) features["w"] = Tensor::from_vector<float>({1, 3});
    return data::Dataset::from_tensor_slices(features, Tensor::from_vector<float>({1, 3})).batch(2);
  };
}

std::vector<fc::ColumnPtr> numeric_columns(int count) {
  std::vector<fc::ColumnPtr> columns;
  for (int i = 0; i < count; ++i) columns.push_back(fc::numeric_column(fmt::format("x{}", i)));
  return columns;
}

// FtrlOptimizer's first step from a zero weight with gradient g (l1 = l2 = 0).
double ftrl_first_step(double g, double lr) { return -g * lr / std::sqrt(0.1 + g * g); }

double value(const Estimator& estimator, const std::string& name) {
  return estimator.get_variable_value(name).item();
}

}  // namespace

TEST_CASE("LinearRegressor's first Ftrl step is TF's: a name at 0.2, None at min(0.2, 1/sqrt(n))") {
  // SUM_OVER_BATCH_SIZE: loss = sum (wx + b - y)^2 / 2, so at w = b = 0
  // dL/dw = sum (0 - y) x = -7 and dL/db = -4. One column: lr = min(0.2, 1/sqrt(1)) = 0.2.
  TempDir dir;
  LinearRegressor one({.feature_columns = numeric_columns(1), .config = config(dir.str())});
  one.train(tiny_input(), {.steps = 1});
  CHECK(value(one, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-7, 0.2)));
  CHECK(value(one, "linear/linear_model/bias_weights") == Approx(ftrl_first_step(-4, 0.2)));
  CHECK(value(one, "linear/linear_model/x0/weights/Ftrl") == Approx(0.1 + 49));
  CHECK(value(one, "linear/linear_model/x0/weights/Ftrl_1") == Approx(-7));

  // 36 columns and the default, the name 'Ftrl': linear.py gives a name _LEARNING_RATE, 0.2.
  TempDir dir_many;
  LinearRegressor many({.feature_columns = numeric_columns(36), .config = config(dir_many.str())});
  many.train(tiny_input(35), {.steps = 1});
  CHECK(value(many, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-7, 0.2)));
  CHECK(value(many, "linear/linear_model/x9/weights") == 0);  // all-zero columns do not move

  // optimizer=None only: Ftrl at min(0.2, 1/sqrt(36)) = 1/6 (_get_default_optimizer).
  TempDir dir_none;
  LinearRegressor none({.feature_columns = numeric_columns(36),
                        .optimizer = std::nullopt,
                        .config = config(dir_none.str())});
  none.train(tiny_input(35), {.steps = 1});
  CHECK(value(none, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-7, 1.0 / 6)));

  // Any other name at 36 columns trains at 0.2 too: SGD's step is -lr * g.
  TempDir dir_sgd;
  LinearRegressor sgd({.feature_columns = numeric_columns(36),
                       .optimizer = "SGD",
                       .config = config(dir_sgd.str())});
  sgd.train(tiny_input(35), {.steps = 1});
  CHECK(value(sgd, "linear/linear_model/x0/weights") == Approx(0.2 * 7));

  // compat::v1: loss_reduction SUM doubles the gradient.
  TempDir dir_v1;
  compat::v1::LinearRegressor v1(
      {.feature_columns = numeric_columns(1), .config = config(dir_v1.str())});
  v1.train(tiny_input(), {.steps = 1});
  CHECK(value(v1, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-14, 0.2)));
}

TEST_CASE("each compat::v1 class sums the loss where its TF2 class averages it") {
  // Batch of 2, labels {1, 3}, zero variables, squared error: under SUM_OVER_BATCH_SIZE the bias
  // gradient is -2 (1 + 3) / 2 = -4 and x0's -2 (1*1 + 3*2) / 2 = -7; under v1's SUM twice that.
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Estimator>(const std::string& dir)> make;
    const char* variable;
    double gradient;
    double learning_rate;
  };
  const std::vector<Case> cases = {
      {"BaselineRegressor",
       [](const std::string& d) {
         return std::make_unique<BaselineRegressor>(BaselineRegressorOptions{.config = config(d)});
       },
       "baseline/bias", -4, 0.3},
      {"compat::v1::BaselineRegressor",
       [](const std::string& d) {
         return std::make_unique<compat::v1::BaselineRegressor>(
             BaselineRegressorOptions{.config = config(d)});
       },
       "baseline/bias", -8, 0.3},
      {"DNNLinearCombinedRegressor",
       [](const std::string& d) {
         return std::make_unique<DNNLinearCombinedRegressor>(DNNLinearCombinedRegressorOptions{
             .linear_feature_columns = numeric_columns(1), .config = config(d)});
       },
       "linear/linear_model/x0/weights", -7, 0.005},
      {"compat::v1::DNNLinearCombinedRegressor",
       [](const std::string& d) {
         return std::make_unique<compat::v1::DNNLinearCombinedRegressor>(
             DNNLinearCombinedRegressorOptions{.linear_feature_columns = numeric_columns(1),
                                               .config = config(d)});
       },
       "linear/linear_model/x0/weights", -14, 0.005},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.name));
    TempDir dir;
    auto estimator = c.make(dir.str());
    estimator->train(tiny_input(), {.steps = 1});
    CHECK(value(*estimator, c.variable) == Approx(ftrl_first_step(c.gradient, c.learning_rate)));
    // Ftrl's accumulator holds 0.1 + g^2: the gradient itself, not only the saturating step.
    CHECK(value(*estimator, std::string(c.variable) + "/Ftrl") ==
          Approx(0.1 + c.gradient * c.gradient));
  }
}

TEST_CASE("weight_column scales each example's loss") {
  // Weights {1, 3}: dL/dw = -(1*1*1 + 3*3*2) = -19, dL/db = -(1*1 + 3*3) = -10 (still divided
  // by the batch size under SUM_OVER_BATCH_SIZE, as TF's).
  TempDir dir;
  LinearRegressor regressor(
      {.feature_columns = numeric_columns(1), .weight_column = "w", .config = config(dir.str())});
  regressor.train(tiny_input(0, true), {.steps = 1});
  CHECK(value(regressor, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-19, 0.2)));
  CHECK(value(regressor, "linear/linear_model/bias_weights") == Approx(ftrl_first_step(-10, 0.2)));
}

TEST_CASE("sparse_combiner: sum or mean of a multivalent column's weights") {
  // Example 1 has tags {a, b} and label 1, example 2 tags {a} (the "" is dropped) and label 3.
  // At zero weights dL/dlogit is -1 and -3. sum: logit = w_a + w_b, so g_a = -4, g_b = -1;
  // mean: logit = (w_a + w_b) / 2 for example 1, so g_a = -0.5 - 3 = -3.5, g_b = -0.5.
  InputFn tags = [](ModeKeys, const InputContext*) {
    Features features{{"tags", Tensor::from_vector<std::string>({"a", "b", "a", ""}, {2, 2})}};
    return data::Dataset::from_tensor_slices(features, Tensor::from_vector<float>({1, 3})).batch(2);
  };
  const std::vector<fc::ColumnPtr> columns{
      fc::categorical_column_with_vocabulary_list("tags", std::vector<std::string>{"a", "b"})};
  for (auto [combiner, g_a, g_b] :
       {std::tuple{fc::Combiner::kSum, -4.0, -1.0}, std::tuple{fc::Combiner::kMean, -3.5, -0.5}}) {
    TempDir dir;
    LinearRegressor regressor(
        {.feature_columns = columns, .config = config(dir.str()), .sparse_combiner = combiner});
    regressor.train(tags, {.steps = 1});
    const std::vector<double> w =
        regressor.get_variable_value("linear/linear_model/tags/weights").to_vector<double>();
    REQUIRE(w.size() == 2);
    CHECK(w[0] == Approx(ftrl_first_step(g_a, 0.2)));
    CHECK(w[1] == Approx(ftrl_first_step(g_b, 0.2)));
  }
}

TEST_CASE("warm_start_from: a new estimator starts from another's trained weights") {
  TempDir first_dir, second_dir;
  LinearRegressor first({.feature_columns = numeric_columns(1), .config = config(first_dir.str())});
  first.train(tiny_input(), {.steps = 1});
  LinearRegressor second({.feature_columns = numeric_columns(1),
                          .config = config(second_dir.str()),
                          .warm_start_from = checkpoint::WarmStartSettings{
                              .ckpt_to_initialize_from = first_dir.str()}});
  second.train(tiny_input(), {.steps = 1});
  // The second model's step-0 checkpoint holds the first one's trained weight.
  checkpoint::TensorBundle start = checkpoint::load(second_dir.str() + "/model.ckpt-0.h5");
  const checkpoint::TensorEntry* weight = start.find("linear/linear_model/x0/weights");
  REQUIRE(weight != nullptr);
  CHECK(weight->value.item() == Approx(ftrl_first_step(-7, 0.2)));
}

TEST_CASE("BaselineRegressor's first Ftrl step uses learning rate 0.3") {
  TempDir dir;
  BaselineRegressor baseline({.config = config(dir.str())});
  baseline.train(tiny_input(), {.steps = 1});
  CHECK(value(baseline, "baseline/bias") == Approx(ftrl_first_step(-4, 0.3)));
}

TEST_CASE("the wide part of DNNLinearCombinedRegressor uses Ftrl at min(0.005, 1/sqrt(n))") {
  TempDir dir;
  DNNLinearCombinedRegressor wide(
      {.linear_feature_columns = numeric_columns(1), .config = config(dir.str())});
  wide.train(tiny_input(), {.steps = 1});
  CHECK(value(wide, "linear/linear_model/x0/weights") == Approx(ftrl_first_step(-7, 0.005)));
  CHECK(value(wide, "global_step") == 1);
}

namespace {

// The first Adagrad step (learning rate lr) of a DNN regressor with one hidden layer of two
// relu (or tanh) units over x0, from the values in the step-0 checkpoint, by hand: the variables
// expected after the step, by name.
std::map<std::string, double> dnn_first_step(const std::string& model_dir, double lr,
                                             bool tanh_units) {
  checkpoint::TensorBundle start = checkpoint::load(model_dir + "/model.ckpt-0.h5");
  auto read = [&](const std::string& name) {
    const checkpoint::TensorEntry* entry = start.find(name);
    REQUIRE_MESSAGE(entry != nullptr, name);
    return entry->value.to_vector<double>();
  };
  std::vector<double> k0 = read("dnn/hiddenlayer_0/kernel"), b0 = read("dnn/hiddenlayer_0/bias"),
                      k1 = read("dnn/logits/kernel"), b1 = read("dnn/logits/bias");
  const double x[2] = {1, 2}, y[2] = {1, 3};
  std::vector<double> gk0(2, 0), gb0(2, 0), gk1(2, 0), gb1(1, 0);
  for (int i = 0; i < 2; ++i) {
    double pre[2], h[2], out = b1[0];
    for (int j = 0; j < 2; ++j) {
      pre[j] = x[i] * k0[j] + b0[j];
      h[j] = tanh_units ? std::tanh(pre[j]) : pre[j] > 0 ? pre[j] : 0;
      out += h[j] * k1[j];
    }
    const double d_out = (out - y[i]);  // d/d out of sum (out - y)^2 / 2
    gb1[0] += d_out;
    for (int j = 0; j < 2; ++j) {
      gk1[j] += d_out * h[j];
      const double slope = tanh_units ? 1 - h[j] * h[j] : pre[j] > 0 ? 1 : 0;
      const double d_pre = d_out * k1[j] * slope;
      gk0[j] += d_pre * x[i];
      gb0[j] += d_pre;
    }
  }
  std::map<std::string, double> expected;
  auto adagrad = [&](const std::string& name, const std::vector<double>& var,
                     const std::vector<double>& grad) {
    for (size_t j = 0; j < var.size(); ++j)
      expected[name + "[" + std::to_string(j) + "]"] =
          var[j] - lr * grad[j] / std::sqrt(0.1 + grad[j] * grad[j]);
  };
  adagrad("dnn/hiddenlayer_0/kernel", k0, gk0);
  adagrad("dnn/hiddenlayer_0/bias", b0, gb0);
  adagrad("dnn/logits/kernel", k1, gk1);
  adagrad("dnn/logits/bias", b1, gb1);
  return expected;
}

void check_dnn_step(const Estimator& estimator, double lr, bool tanh_units = false) {
  for (const auto& [key, expected] : dnn_first_step(estimator.model_dir(), lr, tanh_units)) {
    const std::string name = key.substr(0, key.find('['));
    const size_t index = std::stoul(key.substr(key.find('[') + 1));
    CAPTURE(key);
    CHECK(estimator.get_variable_value(name).to_vector<double>().at(index) ==
          Approx(expected).epsilon(1e-5));
  }
}

}  // namespace

TEST_CASE("DNNRegressor's first Adagrad step is TF's, learning rate 0.05") {
  TempDir dir;
  RunConfig run_config = config(dir.str());
  DNNRegressor dnn(
      {.hidden_units = {2}, .feature_columns = {fc::numeric_column("x0")}, .config = run_config});
  dnn.train(tiny_input(), {.steps = 1});
  check_dnn_step(dnn, 0.05);

  // activation_fn = tanh: the same step through tanh's derivative.
  TempDir dir_tanh;
  DNNRegressor dnn_tanh({.hidden_units = {2},
                         .feature_columns = {fc::numeric_column("x0")},
                         .activation_fn = nn::tanh,
                         .config = config(dir_tanh.str())});
  dnn_tanh.train(tiny_input(), {.steps = 1});
  check_dnn_step(dnn_tanh, 0.05, true);
}

TEST_CASE("the deep part of DNNLinearCombinedRegressor uses Adagrad at 0.001") {
  TempDir dir;
  DNNLinearCombinedRegressor deep({.dnn_feature_columns = {fc::numeric_column("x0")},
                                   .dnn_hidden_units = {2},
                                   .config = config(dir.str())});
  deep.train(tiny_input(), {.steps = 1});
  check_dnn_step(deep, 0.001);
}

TEST_CASE("label_vocabulary: string labels in, string classes out") {
  TempDir dir;
  LinearClassifier classifier({.feature_columns = linear_columns(),
                               .label_vocabulary = {"no", "yes"},
                               .config = config(dir.str())});
  classifier.train(train_input(Task::kStringBinary), {.steps = 300});
  CHECK(classifier.evaluate(eval_input(Task::kStringBinary)).at("accuracy") > 0.9);

  // Predictions carry the vocabulary's strings, consistent with the class ids, and they match
  // the true string labels as often as the accuracy says.
  std::vector<Predictions> predictions = classifier.predict(eval_input(Task::kStringBinary));
  REQUIRE(predictions.size() == 256);
  std::optional<data::Element> truth;
  data::Iterator labels = synthetic(Task::kStringBinary, 256, 99).batch(256).iterator();
  truth = labels.next();
  REQUIRE(truth.has_value());
  const std::vector<std::string> words = truth->labels.to_vector<std::string>();
  int right = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const Predictions& p = predictions[i];
    const std::string predicted = p.at("classes").to_vector<std::string>().at(0);
    CHECK(predicted == (p.at("class_ids").to_vector<int64_t>().at(0) == 1 ? "yes" : "no"));
    CHECK(p.at("all_classes").to_vector<std::string>() == std::vector<std::string>{"no", "yes"});
    right += predicted == words[i];
  }
  CHECK(right > 230);

  // A label outside the vocabulary is an error naming it.
  TempDir other;
  LinearClassifier wrong({.feature_columns = linear_columns(),
                          .label_vocabulary = {"n", "y"},
                          .config = config(other.str())});
  CHECK_THROWS_WITH_AS(wrong.train(train_input(Task::kStringBinary), {.steps = 1}),
                       doctest::Contains("not in label_vocabulary"), InvalidArgumentError);
}
