// A functional model with two inputs and two outputs: compile's per-output losses, loss weights
// and metrics, fit's step against the weighted loss's gradient written out by hand, Keras's log
// names, evaluate / predict, y as a map or a tuple, model_to_estimator, save / load_model of the
// per-output compile config, MirroredStrategy against one replica, and the errors for keys that
// name no output.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "distribute/distribute.h"
#include "estimator/estimator.h"
#include "keras/h5_io.h"
#include "keras/keras.h"
#include "keras/zip_archive.h"
#include "ops/error.h"
#include "tests/keras/saving_util.h"

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

namespace {

using TempDir = saving_test::Scratch;

// x = (a [n, 2], b [n, 3]); "cls": a class in 0..2, "reg": a number [n, 1].
struct Data {
  int64_t n;
  std::vector<float> a, b, reg;
  std::vector<int64_t> cls;
  Tensor ta() const { return Tensor::from_vector(a, {n, 2}); }
  Tensor tb() const { return Tensor::from_vector(b, {n, 3}); }
  Tensor tcls() const { return Tensor::from_vector(cls, {n}); }
  Tensor treg() const { return Tensor::from_vector(reg, {n, 1}); }
  float x(int64_t row, int j) const { return j < 2 ? a[row * 2 + j] : b[row * 3 + j - 2]; }
};

Data make_data(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Data d{n, std::vector<float>(n * 2), std::vector<float>(n * 3), std::vector<float>(n), {}};
  for (auto& v : d.a) v = normal(rng);
  for (auto& v : d.b) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s = d.x(i, 0) - d.x(i, 3);
    d.cls.push_back(s < -0.5f ? 0 : (s < 0.5f ? 1 : 2));
    d.reg[i] = 0.5f * d.x(i, 1) + d.x(i, 2) - 0.25f * d.x(i, 4);
  }
  return d;
}

// y keyed by output name, x as a tuple in input order.
data::Dataset by_name(const Data& d, int64_t batch) {
  return K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()},
                               K::Targets{{"cls", d.tcls()}, {"reg", d.treg()}})
      .batch(batch);
}

// a, b -> concatenate -> "trunk" (linear) -> "cls" (3 logits) and "reg" (1).
std::unique_ptr<K::Model> two_outputs(const std::string& model_dir, uint64_t seed,
                                      std::optional<K::Regularizer> trunk_regularizer = {}) {
  K::clear_session();
  auto a = K::Input({2}, "a");
  auto b = K::Input({3}, "b");
  auto joined = (*L::Concatenate())({a, b});
  auto trunk =
      (*L::Dense({.units = 4, .name = "trunk", .kernel_regularizer = trunk_regularizer}))(joined);
  auto cls = (*L::Dense({.units = 3, .name = "cls"}))(trunk);
  auto reg = (*L::Dense({.units = 1, .name = "reg"}))(trunk);
  auto model = std::make_unique<K::Model>(std::vector<K::KerasTensor>{a, b},
                                          std::vector<K::KerasTensor>{cls, reg});
  model->config().model_dir = model_dir;
  model->config().tf_random_seed = seed;
  return model;
}

void compile_weighted(K::Model& model, double learning_rate = 0.1) {
  model.compile(
      {.optimizer = K::optimizers::SGD({.learning_rate = learning_rate}),
       .loss = K::LossMap{{"cls", K::losses::SparseCategoricalCrossentropy(true)}, {"reg", "mse"}},
       .loss_weights = K::LossWeightMap{{"cls", 1.0}, {"reg", 0.5}},
       .metrics = K::MetricMap{{"cls", {"accuracy"}}, {"reg", {"mae"}}}});
}

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// The named weight of the model as a matrix (a bias is one row).
Matrix weight(K::Model& model, const std::vector<Tensor>& values, const std::string& name) {
  auto specs = model.weights();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].first != name) continue;
    auto flat = values[i].to_vector<float>();
    int64_t cols = values[i].shape().back();
    Matrix m(flat.size() / cols, std::vector<double>(cols));
    for (size_t k = 0; k < flat.size(); ++k) m[k / cols][k % cols] = flat[k];
    return m;
  }
  FAIL("no weight " << name);
  return {};
}

Matrix affine(const Matrix& x, const Matrix& w, const Matrix& bias) {
  Matrix out(x.size(), bias[0]);
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t k = 0; k < w.size(); ++k)
      for (size_t c = 0; c < w[0].size(); ++c) out[r][c] += x[r][k] * w[k][c];
  return out;
}

// The hand-written step: the weighted loss, its parts and its gradient for every weight.
struct HandStep {
  double loss = 0, cls_loss = 0, reg_loss = 0, cls_accuracy = 0, reg_mae = 0;
  std::map<std::string, Matrix> grad;
};

HandStep hand_step(const Data& d, const std::map<std::string, Matrix>& w,
                   K::Regularizer trunk = {}) {
  const size_t n = d.n;
  Matrix x(n, std::vector<double>(5));
  for (size_t r = 0; r < n; ++r)
    for (int j = 0; j < 5; ++j) x[r][j] = d.x(r, j);
  Matrix h = affine(x, w.at("trunk/kernel"), w.at("trunk/bias"));
  Matrix z = affine(h, w.at("cls/kernel"), w.at("cls/bias"));
  Matrix r = affine(h, w.at("reg/kernel"), w.at("reg/bias"));
  HandStep s;
  Matrix dz(n, std::vector<double>(3)), dr(n, std::vector<double>(1));
  for (size_t i = 0; i < n; ++i) {
    double top = std::max({z[i][0], z[i][1], z[i][2]});
    double sum = 0;
    for (double v : z[i]) sum += std::exp(v - top);
    for (int c = 0; c < 3; ++c) {
      double p = std::exp(z[i][c] - top) / sum;
      dz[i][c] = (p - (c == d.cls[i] ? 1.0 : 0.0)) / n;  // d(mean CE)/dz
    }
    s.cls_loss += (std::log(sum) + top - z[i][d.cls[i]]) / n;
    int64_t argmax = std::max_element(z[i].begin(), z[i].end()) - z[i].begin();
    s.cls_accuracy += (argmax == d.cls[i] ? 1.0 : 0.0) / n;
    double e = r[i][0] - d.reg[i];
    s.reg_loss += e * e / n;
    s.reg_mae += std::abs(e) / n;
    dr[i][0] = 0.5 * 2 * e / n;  // loss weight 0.5 times d(mean squared error)/dr
  }
  s.loss = s.cls_loss + 0.5 * s.reg_loss;
  auto grads = [&](const Matrix& in, const Matrix& delta, const std::string& layer) {
    Matrix gk(in[0].size(), std::vector<double>(delta[0].size()));
    Matrix gb(1, std::vector<double>(delta[0].size()));
    for (size_t i = 0; i < n; ++i)
      for (size_t c = 0; c < delta[0].size(); ++c) {
        gb[0][c] += delta[i][c];
        for (size_t k = 0; k < in[0].size(); ++k) gk[k][c] += in[i][k] * delta[i][c];
      }
    s.grad[layer + "/kernel"] = gk;
    s.grad[layer + "/bias"] = gb;
  };
  grads(h, dz, "cls");
  grads(h, dr, "reg");
  // Both heads' gradients reach the shared trunk.
  Matrix dh(n, std::vector<double>(4));
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < 4; ++k) {
      for (int c = 0; c < 3; ++c) dh[i][k] += dz[i][c] * w.at("cls/kernel")[k][c];
      dh[i][k] += dr[i][0] * w.at("reg/kernel")[k][0];
    }
  grads(x, dh, "trunk");
  // The trunk kernel's penalty l1 * sum(|w|) + l2 * sum(w^2) and its gradient.
  const Matrix& kernel = w.at("trunk/kernel");
  for (size_t k = 0; k < kernel.size(); ++k)
    for (size_t c = 0; c < kernel[k].size(); ++c) {
      double v = kernel[k][c];
      s.loss += trunk.l1 * std::abs(v) + trunk.l2 * v * v;
      s.grad["trunk/kernel"][k][c] += trunk.l1 * (v > 0 ? 1 : -1) + 2 * trunk.l2 * v;
    }
  return s;
}

const char* const kWeightNames[] = {"trunk/kernel", "trunk/bias", "cls/kernel",
                                    "cls/bias",     "reg/kernel", "reg/bias"};

std::map<std::string, Matrix> weights_by_name(K::Model& model) {
  auto values = model.get_weights();
  std::map<std::string, Matrix> out;
  for (const char* name : kWeightNames) out[name] = weight(model, values, name);
  return out;
}

// The largest difference between `after` and one SGD step from `before` along `grad`.
double sgd_step_error(std::map<std::string, Matrix> before, std::map<std::string, Matrix> after,
                      std::map<std::string, Matrix> grad, double learning_rate) {
  double worst = 0;
  for (const char* name : kWeightNames)
    for (size_t r = 0; r < after[name].size(); ++r)
      for (size_t c = 0; c < after[name][r].size(); ++c)
        worst = std::max(worst, std::abs(after[name][r][c] -
                                         (before[name][r][c] - learning_rate * grad[name][r][c])));
  return worst;
}

std::set<std::string> keys_of(const std::map<std::string, double>& logs) {
  std::set<std::string> out;
  for (const auto& [key, value] : logs) out.insert(key);
  return out;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no InvalidArgumentError)";
}

}  // namespace

TEST_CASE("keras two outputs: fit's step is the weighted loss's gradient step, Keras's logs") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 5);
  compile_weighted(*model);
  CHECK(model->output_names() == std::vector<std::string>{"cls", "reg"});
  CHECK(model->input_names() == std::vector<std::string>{"a", "b"});
  Data d = make_data(16, 1);
  auto before = weights_by_name(*model);  // the step-0 weights fit starts from
  HandStep hand = hand_step(d, before);
  K::History history = model->fit(by_name(d, 16), {.verbose = 0});  // one step of all 16 rows

  std::set<std::string> keys;
  for (const auto& [key, values] : history.history) keys.insert(key);
  CHECK(keys == std::set<std::string>{"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"});
  CHECK(history["loss"][0] == doctest::Approx(hand.loss).epsilon(1e-6));
  CHECK(history["cls_loss"][0] == doctest::Approx(hand.cls_loss).epsilon(1e-6));
  CHECK(history["reg_loss"][0] == doctest::Approx(hand.reg_loss).epsilon(1e-6));  // unweighted
  CHECK(history["cls_accuracy"][0] == doctest::Approx(hand.cls_accuracy));
  CHECK(history["reg_mae"][0] == doctest::Approx(hand.reg_mae).epsilon(1e-6));

  CHECK(sgd_step_error(before, weights_by_name(*model), hand.grad, 0.1) < 1e-6);
}

TEST_CASE("keras two outputs: a kernel regularizer's penalty joins the total loss and its step") {
  TempDir dir;
  const K::Regularizer l1l2{.l1 = 0.001, .l2 = 0.01};
  auto model = two_outputs(dir.root.string(), 5, l1l2);
  compile_weighted(*model);
  Data d = make_data(16, 1);
  auto before = weights_by_name(*model);
  HandStep hand = hand_step(d, before, l1l2);
  K::History history = model->fit(by_name(d, 16), {.verbose = 0});
  // "loss" includes the penalty; the outputs' losses do not.
  CHECK(history["loss"][0] == doctest::Approx(hand.loss).epsilon(1e-6));
  CHECK(history["loss"][0] > history["cls_loss"][0] + 0.5 * history["reg_loss"][0] + 1e-4);
  CHECK(history["cls_loss"][0] == doctest::Approx(hand.cls_loss).epsilon(1e-6));
  CHECK(sgd_step_error(before, weights_by_name(*model), hand.grad, 0.1) < 1e-6);
}

TEST_CASE("keras two outputs: evaluate, predict, validation logs; y as a map or a tuple") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 6);
  compile_weighted(*model, 0.05);
  Data train = make_data(64, 2), test = make_data(24, 3);
  auto history = model->fit(by_name(train, 16),
                            {.epochs = 2, .validation_data = by_name(test, 8), .verbose = 0});
  for (const char* key :
       {"val_loss", "val_cls_loss", "val_reg_loss", "val_cls_accuracy", "val_reg_mae"})
    CHECK(history[key].size() == 2);
  CHECK(history["loss"][1] < history["loss"][0]);

  auto logs = model->evaluate(by_name(test, 8), {.verbose = 0});
  CHECK(keys_of(logs) ==
        std::set<std::string>{"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"});
  CHECK(logs["loss"] == doctest::Approx(logs["cls_loss"] + 0.5 * logs["reg_loss"]).epsilon(1e-6));
  CHECK(logs["loss"] == doctest::Approx(history["val_loss"][1]).epsilon(1e-6));

  // y as a tuple in output order, x by Input name: the same evaluation.
  auto tuple = K::from_tensor_slices(data::Features{{"a", test.ta()}, {"b", test.tb()}},
                                     std::vector<Tensor>{test.tcls(), test.treg()})
                   .batch(8);
  auto tuple_logs = model->evaluate(tuple, {.verbose = 0});
  for (const auto& [key, value] : tuple_logs)
    CHECK(value == doctest::Approx(logs.at(key)).epsilon(1e-6));

  // predict: one tensor per output, in output order; its values give evaluate's losses.
  auto predicted = model->predict(by_name(test, 8));
  REQUIRE(predicted.size() == 2);
  CHECK(predicted[0].shape() == Shape{24, 3});
  CHECK(predicted[1].shape() == Shape{24, 1});
  auto reg = predicted[1].to_vector<float>();
  double mse = 0;
  for (int64_t i = 0; i < 24; ++i) mse += std::pow(reg[i] - test.reg[i], 2) / 24;
  CHECK(logs["reg_loss"] == doctest::Approx(mse).epsilon(1e-5));
}

TEST_CASE("keras two outputs: fit and evaluate on tensors equal the same rows as a dataset") {
  Data train = make_data(48, 4), test = make_data(20, 5);
  TempDir dir_a, dir_b;
  auto on_dataset = two_outputs(dir_a.root.string(), 8);
  auto on_tensors = two_outputs(dir_b.root.string(), 8);
  compile_weighted(*on_dataset, 0.05);
  compile_weighted(*on_tensors, 0.05);
  // Keras's fit(x=[a, b], y={"cls": ..., "reg": ...}, batch_size=16, shuffle=False,
  // validation_split=0.25): the last 12 rows are the validation data.
  auto history = on_tensors->fit(
      std::vector<Tensor>{train.ta(), train.tb()},
      K::Targets{{"cls", train.tcls()}, {"reg", train.treg()}},
      {.epochs = 2, .verbose = 0, .batch_size = 16, .validation_split = 0.25, .shuffle = false});
  auto take = [](const Data& d, int64_t begin, int64_t count) {
    Data out{count, {}, {}, {}, {}};
    out.a.assign(d.a.begin() + begin * 2, d.a.begin() + (begin + count) * 2);
    out.b.assign(d.b.begin() + begin * 3, d.b.begin() + (begin + count) * 3);
    out.cls.assign(d.cls.begin() + begin, d.cls.begin() + begin + count);
    out.reg.assign(d.reg.begin() + begin, d.reg.begin() + begin + count);
    return out;
  };
  auto expected = on_dataset->fit(
      by_name(take(train, 0, 36), 16),
      {.epochs = 2, .validation_data = by_name(take(train, 36, 12), 16), .verbose = 0});
  for (const char* key : {"loss", "cls_loss", "reg_loss", "val_loss", "val_cls_accuracy"}) {
    REQUIRE(history[key].size() == 2);
    for (size_t e = 0; e < 2; ++e)
      CHECK(history[key][e] == doctest::Approx(expected[key][e]).epsilon(1e-6));
  }
  // evaluate: x by Input name, y as a tuple in output order.
  auto logs =
      on_tensors->evaluate(data::Features{{"a", test.ta()}, {"b", test.tb()}},
                           std::vector<Tensor>{test.tcls(), test.treg()}, {.verbose = 0}, 8);
  auto want = on_tensors->evaluate(by_name(test, 8), {.verbose = 0});
  for (const auto& [key, value] : want) CHECK(logs.at(key) == doctest::Approx(value).epsilon(1e-6));
  // Tensors whose rows differ: an error naming the shapes.
  CHECK_THROWS_WITH_AS(
      on_tensors->evaluate(std::vector<Tensor>{train.ta(), test.tb()},
                           K::Targets{{"cls", test.tcls()}, {"reg", test.treg()}}, {.verbose = 0}),
      doctest::Contains("the same number of rows"), InvalidArgumentError);
}

TEST_CASE("keras two outputs: 'accuracy' for every output picks each one's accuracy") {
  TempDir dir;
  K::clear_session();
  auto x = K::Input({5}, "x");
  auto digit = (*L::Dense({.units = 3, .name = "digit"}))(x);
  auto flag = (*L::Dense({.units = 1, .activation = "sigmoid", .name = "flag"}))(x);
  K::Model both({x}, {digit, flag});
  both.config().model_dir = dir.root.string();
  both.config().tf_random_seed = 4;
  // One loss list in output order, no weights, one flat metric list for every output.
  both.compile(
      {.optimizer = "sgd",
       .loss = K::LossList{K::losses::SparseCategoricalCrossentropy(true), "binary_crossentropy"},
       .metrics = {"accuracy"}});
  Data d = make_data(40, 7);
  std::vector<float> x5(40 * 5), bits(40);
  for (int64_t i = 0; i < 40; ++i) {
    for (int j = 0; j < 5; ++j) x5[i * 5 + j] = d.x(i, j);
    bits[i] = d.reg[i] > 0 ? 1.f : 0.f;
  }
  auto ds = K::from_tensor_slices(
                data::Features{{"x", Tensor::from_vector(x5, {40, 5})}},
                K::Targets{{"digit", d.tcls()}, {"flag", Tensor::from_vector(bits, {40})}})
                .batch(10);
  auto logs = both.evaluate(ds, {.verbose = 0});
  CHECK(keys_of(logs) == std::set<std::string>{"loss", "digit_loss", "flag_loss", "digit_accuracy",
                                               "flag_accuracy"});
  CHECK(logs["loss"] == doctest::Approx(logs["digit_loss"] + logs["flag_loss"]).epsilon(1e-6));
  auto predicted = both.predict(ds);
  auto logits = predicted[0].to_vector<float>();
  auto p = predicted[1].to_vector<float>();
  double sparse = 0, binary = 0;
  for (int64_t i = 0; i < 40; ++i) {
    int64_t argmax = std::max_element(&logits[i * 3], &logits[i * 3] + 3) - &logits[i * 3];
    sparse += (argmax == d.cls[i]) / 40.0;
    binary += ((p[i] > 0.5f ? 1.f : 0.f) == bits[i]) / 40.0;
  }
  CHECK(logs["digit_accuracy"] == doctest::Approx(sparse));  // sparse_categorical_accuracy
  CHECK(logs["flag_accuracy"] == doctest::Approx(binary));   // binary_accuracy

  // One y tensor for both outputs: each output takes it (_conform_to_outputs broadcasts it).
  auto one_y =
      data::Dataset::from_tensor_slices(data::Features{{"x", Tensor::from_vector(x5, {40, 5})}},
                                        Tensor::from_vector(bits, {40}))
          .batch(10);
  auto shared = both.evaluate(one_y, {.verbose = 0});
  CHECK(shared["flag_loss"] == doctest::Approx(logs["flag_loss"]).epsilon(1e-6));
  CHECK(shared["flag_accuracy"] == doctest::Approx(binary));
  CHECK(shared["digit_loss"] != doctest::Approx(logs["digit_loss"]));  // digit took the bits
}

TEST_CASE("keras two outputs: keys that name no output are errors naming the outputs") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 8);
  std::string wrong_loss = message_of([&] {
    model->compile({.loss = K::LossMap{{"cls", "mse"}, {"regression", "mse"}}});
  });
  CHECK(wrong_loss.find("'regression'") != std::string::npos);
  CHECK(wrong_loss.find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = "mse", .loss_weights = K::LossWeightMap{{"clss", 1.0}}});
        }).find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] { model->compile({.loss = K::LossList{"mse"}}); }).find("2 outputs") !=
        std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = "mse", .metrics = K::MetricMap{{"out", {"mae"}}}});
        }).find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = K::LossList{std::nullopt, std::nullopt}});
        }).find("no loss for any") != std::string::npos);

  compile_weighted(*model);
  Data d = make_data(8, 9);
  auto wrong_y = K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()},
                                       K::Targets{{"cls", d.tcls()}, {"regr", d.treg()}})
                     .batch(8);
  std::string wrong_label = message_of([&] { model->evaluate(wrong_y, {.verbose = 0}); });
  CHECK(wrong_label.find("'regr'") != std::string::npos);
  CHECK(wrong_label.find("['cls', 'reg']") != std::string::npos);
  auto missing_y =
      K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()}, K::Targets{{"cls", d.tcls()}})
          .batch(8);
  CHECK(message_of([&] { model->fit(missing_y, {.verbose = 0}); }).find("\"reg\"") !=
        std::string::npos);
  auto short_y =
      K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()}, std::vector<Tensor>{d.tcls()})
          .batch(8);
  CHECK(message_of([&] {
          model->evaluate(short_y, {.verbose = 0});
        }).find("has 2 outputs ['cls', 'reg'] but the batch's y is a tuple of 1") !=
        std::string::npos);
  auto long_x = K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb(), d.ta()},
                                      std::vector<Tensor>{d.tcls(), d.treg()})
                    .batch(8);
  CHECK(message_of([&] {
          model->evaluate(long_x, {.verbose = 0});
        }).find("has 2 inputs ['a', 'b'] but the batch's x is a tuple of 3") != std::string::npos);
  CHECK(message_of([&] {
          K::pack_x_y(data::Features{{"a#1", d.ta()}});
        }).find("'#'") != std::string::npos);
}

TEST_CASE("keras two outputs: model_to_estimator evaluates as model.evaluate and trains") {
  TempDir keras_dir, est_dir;
  auto model = two_outputs(keras_dir.root.string(), 10);
  compile_weighted(*model);
  Data train = make_data(64, 11), test = make_data(20, 12);
  model->fit(by_name(train, 16), {.verbose = 0});
  auto keras_logs = model->evaluate(by_name(test, 8), {.verbose = 0});

  Estimator estimator = K::model_to_estimator(*model, {.model_dir = est_dir.root.string()});
  auto input_fn = [](data::Dataset ds) {
    return [ds](ModeKeys, const InputContext*) { return ds; };
  };
  Metrics before = estimator.evaluate(input_fn(by_name(test, 8)));
  CHECK(before.at("loss") == doctest::Approx(keras_logs.at("loss")).epsilon(1e-6));
  CHECK(before.at("cls_accuracy") == doctest::Approx(keras_logs.at("cls_accuracy")));
  CHECK(before.at("reg_mae") == doctest::Approx(keras_logs.at("reg_mae")).epsilon(1e-6));
  estimator.train(input_fn(by_name(train, 16).repeat()), {.steps = 40});
  Metrics after = estimator.evaluate(input_fn(by_name(test, 8)));
  CHECK(after.at("global_step") == 40);
  CHECK(after.at("loss") < before.at("loss"));
  // Predictions keyed by the output names, one row per example.
  auto predictions = estimator.predict(input_fn(by_name(test, 8)));
  REQUIRE(predictions.size() == 20);
  CHECK(predictions[0].at("cls").shape() == Shape{3});
  CHECK(predictions[0].at("reg").shape() == Shape{1});
}

TEST_CASE("keras two outputs: save and load_model keep the per-output compile config") {
  TempDir dir;
  auto model = two_outputs(dir / "model", 13, K::Regularizer{.l2 = 0.02});
  compile_weighted(*model);
  Data d = make_data(32, 14);
  model->fit(by_name(d, 16), {.verbose = 0});
  auto logs = model->evaluate(by_name(d, 16), {.verbose = 0});
  for (const char* file : {"two.keras", "two.h5"}) {
    CAPTURE(file);
    std::string path = dir / file;
    model->save(path);
    // Where Keras keeps it: config.json's compile_config, the .h5 file's training_config.
    std::string config_text, model_text;
    if (path.ends_with(".keras")) {
      for (const auto& [name, bytes] : K::read_zip(path))
        if (name == "config.json") config_text = bytes;
      model_text = config_text;
      config_text = nlohmann::json::parse(config_text)["compile_config"].dump();
    } else {
      auto file = K::H5File::read(path);
      config_text = file.read_string("/", "training_config").value_or("{}");
      model_text = file.read_string("/", "model_config").value_or("");
    }
    auto config = nlohmann::json::parse(config_text);
    CHECK(config["loss"]["cls"]["class_name"] == "SparseCategoricalCrossentropy");
    CHECK(config["loss"]["reg"] == "mse");
    CHECK(config["loss_weights"] == nlohmann::json{{"cls", 1.0}, {"reg", 0.5}});
    CHECK(config["metrics"] == nlohmann::json{{"cls", {"accuracy"}}, {"reg", {"mae"}}});
    // The trunk's kernel_regularizer in the model config, as regularizers.serialize writes it.
    nlohmann::json regularizer;
    const auto model_config = nlohmann::json::parse(model_text);
    for (const auto& layer : model_config["config"]["layers"])
      if (layer["config"]["name"] == "trunk") regularizer = layer["config"]["kernel_regularizer"];
    CHECK(regularizer["class_name"] == "L2");
    CHECK(regularizer["config"]["l2"] == 0.02);
    auto loaded = K::load_model(path);
    const auto& options = *loaded->compile_options();
    REQUIRE(std::holds_alternative<K::LossMap>(options.loss));
    const auto& losses = std::get<K::LossMap>(options.loss);
    CHECK(losses.size() == 2);
    CHECK(std::get<K::Loss>(*losses.at("cls")).name == "sparse_categorical_crossentropy");
    CHECK(std::get<K::Loss>(*losses.at("cls")).from_logits);
    CHECK(std::get<std::string>(*losses.at("reg")) == "mse");
    CHECK(options.loss_weights ==
          decltype(options.loss_weights)(K::LossWeightMap{{"cls", 1.0}, {"reg", 0.5}}));
    CHECK(options.metrics ==
          K::CompileMetrics(K::MetricMap{{"cls", {"accuracy"}}, {"reg", {"mae"}}}));
    auto loaded_logs = loaded->evaluate(by_name(d, 16), {.verbose = 0});
    CHECK(keys_of(loaded_logs) == keys_of(logs));
    for (const auto& [key, value] : loaded_logs)
      CHECK(value == doctest::Approx(logs.at(key)).epsilon(1e-6));
  }
}

TEST_CASE("keras two outputs under MirroredStrategy with 2 replicas equal one replica") {
  Data d = make_data(64, 15);
  auto run = [&](const std::string& model_dir, std::shared_ptr<distribute::Strategy> strategy) {
    auto model = two_outputs(model_dir, 16);
    model->config().train_distribute = std::move(strategy);  // as `with strategy.scope():`
    compile_weighted(*model);
    auto history = model->fit(by_name(d, 16), {.epochs = 2, .verbose = 0});
    return std::make_pair(history, weights_by_name(*model));
  };
  TempDir one, two;
  auto [single_history, single] = run(one.root.string(), nullptr);
  auto [mirrored_history, mirrored] = run(
      two.root.string(),
      std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0", "/cpu:1"}));
  for (const char* name : kWeightNames)
    for (size_t r = 0; r < single[name].size(); ++r)
      for (size_t c = 0; c < single[name][r].size(); ++c)
        CHECK(mirrored[name][r][c] == doctest::Approx(single[name][r][c]).epsilon(1e-5));
  for (const char* key : {"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"})
    for (size_t e = 0; e < 2; ++e)
      CHECK(mirrored_history[key][e] == doctest::Approx(single_history[key][e]).epsilon(1e-5));
}
