// The ONNX export of traced functions: a small CNN (conv2d + bias + relu, max pooling, flatten,
// dense layers, softmax, argmax, cast) and an MLP are traced, written as ONNX, checked by
// onnx.checker (Debian's python3-onnx) and run by onnxruntime-node, whose outputs must equal
// est's within 1e-5 at a batch size the trace never saw; likewise batch norm in inference mode
// and one_hot. Ops that ONNX cannot get are refused with their name.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "export/onnx_export.h"
#include "export/onnx_model.h"
#include "export/trace.h"
#include "ops/ops.h"
#include "tests/export/onnx_tools.h"

namespace {

using est::Tensor;
using est::serving::NamedTensors;
namespace ops = est::ops;

Tensor random_tensor(const est::Shape& shape, unsigned seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(static_cast<size_t>(ops::num_elements(shape)));
  for (float& v : values) v = uniform(generator);
  return Tensor::from_vector(values, shape);
}

struct Cnn {
  Tensor kernel = random_tensor({3, 3, 2, 4}, 1, 0.5f);
  Tensor conv_bias = random_tensor({4}, 2, 0.1f);
  Tensor dense_kernel = random_tensor({4 * 4 * 4, 8}, 3, 0.3f);
  Tensor dense_bias = random_tensor({8}, 4, 0.1f);
  Tensor logits_kernel = random_tensor({8, 3}, 5, 0.3f);

  NamedTensors operator()(const NamedTensors& features) const {
    Tensor x = ops::conv2d(features.at("image"), kernel, conv_bias,
                           {.padding = ops::Padding::kSame, .activation = ops::Activation::kRelu});
    x = ops::max_pool2d(x, {});
    x = ops::linear(ops::flatten(x), dense_kernel, dense_bias, ops::Activation::kRelu);
    Tensor logits = ops::matmul(x, logits_kernel);
    Tensor classes = ops::argmax(logits, 1);
    return {{"logits", logits},
            {"probabilities", ops::softmax(logits)},
            {"classes", classes},
            {"classes_f", ops::cast(classes, est::DType::kF32)}};
  }
};

struct Mlp {
  Tensor hidden = random_tensor({5, 6}, 7, 0.5f);
  Tensor bias = random_tensor({6}, 8, 0.1f);
  Tensor out = random_tensor({6, 2}, 9, 0.5f);

  NamedTensors operator()(const NamedTensors& features) const {
    Tensor x = ops::tanh(ops::add(ops::matmul(features.at("x"), hidden), bias));
    x = ops::sub(ops::mul(ops::relu(x), 2.0), ops::sigmoid(x));
    return {{"y", ops::matmul(x, out)}, {"sum", ops::sum(x, {1})}};
  }
};

std::string export_model(const std::function<NamedTensors(const NamedTensors&)>& fn,
                         const std::string& input, const est::Shape& row_shape) {
  auto inputs_at = [&](int64_t batch, unsigned seed) {
    est::Shape shape{batch};
    shape.insert(shape.end(), row_shape.begin(), row_shape.end());
    return NamedTensors{{input, random_tensor(shape, seed)}};
  };
  auto first = est::serving::trace(fn, inputs_at(2, 11));
  auto second = est::serving::trace(fn, inputs_at(3, 12));
  return est::serving::to_onnx(first, second, "serving_default");
}

// Checks `model` with onnx.checker and compares onnxruntime's outputs with fn's on `inputs`;
// skips (with the reason) when either tool is missing.
void cross_check(const std::string& model,
                 const std::function<NamedTensors(const NamedTensors&)>& fn,
                 const NamedTensors& inputs) {
  est::testing::ScratchDir dir;
  const std::string path = dir / "model.onnx";
  std::ofstream(path, std::ios::binary) << model;
  // est's own interpreter of the file (what est-serve runs) first: it needs no outside tool.
  ops::NoGradGuard no_grad;
  NamedTensors expected = fn(inputs);
  NamedTensors interpreted = est::serving::OnnxModel::load(path).run(inputs);
  REQUIRE(interpreted.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    INFO("output ", name, " (est's interpreter)");
    REQUIRE(interpreted.count(name) == 1);
    REQUIRE(interpreted.at(name).shape() == tensor.shape());
    std::vector<double> theirs = interpreted.at(name).to_vector<double>();
    std::vector<double> ours = tensor.to_vector<double>();
    for (size_t i = 0; i < ours.size(); ++i)
      CHECK(theirs[i] == doctest::Approx(ours[i]).epsilon(1e-5));
  }
  if (!est::testing::check_with_onnx_checker(path)) return;
  nlohmann::json results;
  if (!est::testing::run_onnxruntime(path, inputs, dir, results)) return;
  REQUIRE(results.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    INFO("output ", name);
    REQUIRE(results.contains(name));
    est::testing::check_close(results[name], tensor);
  }
}

}  // namespace

TEST_CASE("export: a CNN traced to ONNX runs in onnxruntime like est, at another batch size") {
  Cnn cnn;
  const std::string model = export_model(cnn, "image", {8, 8, 2});
  CHECK(!model.empty());
  cross_check(model, cnn, {{"image", random_tensor({5, 8, 8, 2}, 21)}});
}

TEST_CASE("export: an MLP with elementwise ops and a reduction matches est in onnxruntime") {
  Mlp mlp;
  const std::string model = export_model(mlp, "x", {5});
  cross_check(model, mlp, {{"x", random_tensor({4, 5}, 31)}});
}

// Batch norm with moving statistics (a BatchNormalization layer in PREDICT mode) and one_hot
// (a bucketized or indicator input), each as the ONNX ops they are written as.
struct BatchNormOneHot {
  Tensor gamma = random_tensor({4}, 51, 1.0f);
  Tensor beta = random_tensor({4}, 52, 0.5f);
  Tensor mean = random_tensor({4}, 53, 0.5f);
  Tensor variance = ops::add(ops::abs(random_tensor({4}, 54, 1.0f)), 0.1);
  Tensor weights = random_tensor({5, 2}, 55, 0.5f);

  NamedTensors operator()(const NamedTensors& features) const {
    const Tensor& x = features.at("x");  // [batch, 4]
    Tensor normalized = ops::batch_norm_inference(x, gamma, beta, mean, variance, 1e-3);
    Tensor unscaled = ops::batch_norm_inference(x, Tensor(), Tensor(), mean, variance, 1e-3);
    Tensor ids = ops::argmax(x, 1);  // [batch] in [0, 4): one_hot over 5 leaves a column off
    Tensor hot = ops::one_hot(ids, 5, 2.0, -1.0);
    return {{"normalized", normalized},
            {"unscaled", unscaled},
            {"one_hot", ops::one_hot(ids, 5)},
            {"y", ops::matmul(hot, weights)}};
  }
};

TEST_CASE("export: batch norm in inference mode and one_hot match est in onnxruntime") {
  BatchNormOneHot model;
  cross_check(export_model(model, "x", {4}), model, {{"x", random_tensor({6, 4}, 56)}});
}

// est's interpreter holds transposes lazily and runs nodes of constants once at load
// (onnx_model.cpp): here a conv2d's output is used in NCHW (the exported graph's own layout) by
// elementwise ops, a flatten, a cast and a pool, and a dense kernel is transposed inside the
// function (a node of constants only). One loaded model runs at two batch sizes in turn (both
// small enough to run on the calling thread alone, which must get its thread count back).
struct Layouts {
  Tensor kernel = random_tensor({3, 3, 2, 4}, 61, 0.5f);
  Tensor bias = random_tensor({4}, 62, 0.1f);
  Tensor dense_kernel = random_tensor({8, 4 * 8 * 8}, 63, 0.3f);

  NamedTensors operator()(const NamedTensors& features) const {
    Tensor x = ops::conv2d(features.at("image"), kernel, bias, {.padding = ops::Padding::kSame});
    Tensor nchw = ops::transpose(x, {0, 3, 1, 2});
    Tensor rectified = ops::abs(ops::neg(ops::relu(nchw)));
    Tensor flat = ops::flatten(rectified);
    return {{"pooled", ops::avg_pool2d(ops::transpose(rectified, {0, 2, 3, 1}), {})},
            {"flat", flat},
            {"negated", ops::cast(ops::neg(nchw), est::DType::kF64)},
            {"logits", ops::matmul(flat, ops::transpose(dense_kernel, {1, 0}))}};
  }
};

TEST_CASE("export: est's interpreter keeps lazily transposed values and folded constants right") {
  Layouts layouts;
  const std::string model = export_model(layouts, "image", {8, 8, 2});
  est::testing::ScratchDir dir;
  const std::string path = dir / "model.onnx";
  std::ofstream(path, std::ios::binary) << model;
  const est::serving::OnnxModel loaded = est::serving::OnnxModel::load(path);
  ops::NoGradGuard no_grad;
  const int threads = ops::num_threads();
  ops::set_num_threads(3);
  for (int64_t batch : {5, 1, 5}) {
    CAPTURE(batch);
    const NamedTensors inputs{
        {"image", random_tensor({batch, 8, 8, 2}, 64 + static_cast<unsigned>(batch))}};
    const NamedTensors expected = layouts(inputs);
    const NamedTensors interpreted = loaded.run(inputs);
    CHECK(ops::num_threads() == 3);  // a small request ran serially, and gave the count back
    REQUIRE(interpreted.size() == expected.size());
    for (const auto& [name, tensor] : expected) {
      INFO("output ", name);
      REQUIRE(interpreted.count(name) == 1);
      REQUIRE(interpreted.at(name).shape() == tensor.shape());
      REQUIRE(interpreted.at(name).dtype() == tensor.dtype());
      std::vector<double> theirs = interpreted.at(name).to_vector<double>();
      std::vector<double> ours = tensor.to_vector<double>();
      for (size_t i = 0; i < ours.size(); ++i)
        CHECK(theirs[i] == doctest::Approx(ours[i]).epsilon(1e-5));
    }
  }
  ops::set_num_threads(threads);
  cross_check(model, layouts, {{"image", random_tensor({3, 8, 8, 2}, 69)}});
}

TEST_CASE("export: one loaded model run from several threads at once gives each its own answer") {
  Layouts layouts;
  est::testing::ScratchDir dir;
  const std::string path = dir / "model.onnx";
  std::ofstream(path, std::ios::binary) << export_model(layouts, "image", {8, 8, 2});
  const est::serving::OnnxModel loaded = est::serving::OnnxModel::load(path);
  constexpr int kThreads = 4;
  std::vector<NamedTensors> inputs, alone(kThreads), together(kThreads);
  for (int t = 0; t < kThreads; ++t)
    inputs.push_back({{"image", random_tensor({1 + t % 2, 8, 8, 2}, 70 + t)}});
  for (int t = 0; t < kThreads; ++t) alone[t] = loaded.run(inputs[t]);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) together[t] = loaded.run(inputs[t]);
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t)
    for (const auto& [name, tensor] : alone[t]) {
      INFO("thread ", t, " output ", name);
      REQUIRE(together[t].count(name) == 1);
      CHECK(together[t].at(name).to_vector<double>() == tensor.to_vector<double>());
    }
}

TEST_CASE("export: an op with no ONNX form is refused with its name, unless nothing uses it") {
  Tensor gamma = random_tensor({4}, 41), beta = random_tensor({4}, 42);
  auto uses_batch_statistics = [&](const NamedTensors& features) {
    return NamedTensors{
        {"y", ops::batch_norm_training(features.at("x"), gamma, beta, 1e-3).output}};
  };
  CHECK_THROWS_WITH_AS(export_model(uses_batch_statistics, "x", {4}),
                       doctest::Contains("'batch_norm_training'"), est::UnimplementedError);
  auto uses_loss = [&](const NamedTensors& features) {
    Tensor labels = ops::cast(ops::argmax(features.at("x"), 1), est::DType::kI32);
    return NamedTensors{
        {"loss", ops::sparse_softmax_cross_entropy_with_logits(labels, features.at("x"))}};
  };
  CHECK_THROWS_WITH_AS(export_model(uses_loss, "x", {4}),
                       doctest::Contains("sparse_softmax_cross_entropy"), est::UnimplementedError);
  auto dead_statistics = [&](const NamedTensors& features) {
    Tensor unused = ops::batch_norm_training(features.at("x"), gamma, beta, 1e-3).output;
    return NamedTensors{{"y", ops::relu(features.at("x"))}};
  };
  CHECK(!export_model(dead_statistics, "x", {4}).empty());
}

TEST_CASE("export: a constant that depends on the input values is refused") {
  auto host_values = [](const NamedTensors& features) {
    // Read on the host and fed back: the trace cannot see where the values came from.
    std::vector<float> values = features.at("x").to_vector<float>();
    Tensor copy = Tensor::from_vector(std::vector<float>(values.begin(), values.begin() + 4));
    return NamedTensors{{"y", ops::add(features.at("x"), copy)}};
  };
  CHECK_THROWS_AS(export_model(host_values, "x", {4}), est::UnimplementedError);
}
