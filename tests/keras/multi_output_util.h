// Helpers of the two-output tests (multi_output_test.cpp, multi_output_bridges_test.cpp): a
// functional model with two inputs and two outputs over a shared trunk, its data, and its fit step
// written out by hand.
#pragma once

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

namespace multi_output {

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

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

inline Data make_data(int64_t n, uint32_t seed) {
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
inline data::Dataset by_name(const Data& d, int64_t batch) {
  return K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()},
                               K::Targets{{"cls", d.tcls()}, {"reg", d.treg()}})
      .batch(batch);
}

// a, b -> concatenate -> "trunk" (linear) -> "cls" (3 logits) and "reg" (1).
inline std::unique_ptr<K::Model> two_outputs(const std::string& model_dir, uint64_t seed,
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

inline void compile_weighted(K::Model& model, double learning_rate = 0.1) {
  model.compile(
      {.optimizer = K::optimizers::SGD({.learning_rate = learning_rate}),
       .loss = K::LossMap{{"cls", K::losses::SparseCategoricalCrossentropy(true)}, {"reg", "mse"}},
       .loss_weights = K::LossWeightMap{{"cls", 1.0}, {"reg", 0.5}},
       .metrics = K::MetricMap{{"cls", {"accuracy"}}, {"reg", {"mae"}}}});
}

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// The named weight of the model as a matrix (a bias is one row).
inline Matrix weight(K::Model& model, const std::vector<Tensor>& values, const std::string& name) {
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

inline Matrix affine(const Matrix& x, const Matrix& w, const Matrix& bias) {
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

inline HandStep hand_step(const Data& d, const std::map<std::string, Matrix>& w,
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

inline std::map<std::string, Matrix> weights_by_name(K::Model& model) {
  auto values = model.get_weights();
  std::map<std::string, Matrix> out;
  for (const char* name : kWeightNames) out[name] = weight(model, values, name);
  return out;
}

// The largest difference between `after` and one SGD step from `before` along `grad`.
inline double sgd_step_error(std::map<std::string, Matrix> before,
                             std::map<std::string, Matrix> after,
                             std::map<std::string, Matrix> grad, double learning_rate) {
  double worst = 0;
  for (const char* name : kWeightNames)
    for (size_t r = 0; r < after[name].size(); ++r)
      for (size_t c = 0; c < after[name][r].size(); ++c)
        worst = std::max(worst, std::abs(after[name][r][c] -
                                         (before[name][r][c] - learning_rate * grad[name][r][c])));
  return worst;
}

inline std::set<std::string> keys_of(const std::map<std::string, double>& logs) {
  std::set<std::string> out;
  for (const auto& [key, value] : logs) out.insert(key);
  return out;
}

inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no InvalidArgumentError)";
}

}  // namespace multi_output
