// Mixed precision (nn/mixed_precision.h): Keras's policy names and errors, the global policy
// and its scope, layers under mixed_bfloat16 (float32 variables, bfloat16 outputs, gradients
// reaching the float32 variables, batch norm and softmax in float32, a float32 output layer),
// the losses' upcast, and the MLP and CNN of training_test.cpp trained under mixed_bfloat16
// ending near their float32 loss.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "ops/ops.h"
#include "tests/nn/toy_problems.h"

using namespace est;
using namespace est::nn;
using est::testing::Batch;
using est::testing::make_bars;
using est::testing::make_blobs;
using est::testing::mlp;
using mixed_precision::Policy;
using mixed_precision::PolicyScope;

namespace {

std::string message_of_unimplemented(std::string_view name) {
  try {
    Policy policy(name);
  } catch (const UnimplementedError& e) {
    return e.what();
  }
  return "<no UnimplementedError>";
}

Tensor cnn(ModelContext& ctx, const Tensor& image) {
  Tensor x = conv2d(ctx, image, {.filters = 8, .kernel = 3, .activation = relu});
  x = batch_normalization(ctx, x);
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 16, .activation = relu});
  return dense(ctx, x, {.units = 2});
}

// Trains `model` for `steps` under the global policy `policy`; returns the first and last loss.
template <class Model, class MakeOptimizer>
std::pair<double, double> train(const char* policy, Model model, MakeOptimizer make_optimizer,
                                const Batch& batch, int steps, uint64_t seed) {
  PolicyScope scope(policy);
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, seed);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    ctx.begin_call();
    Tensor loss = sparse_softmax_cross_entropy(batch.labels, model(ctx, batch.features));
    REQUIRE(loss.dtype() == DType::kF32);
    make_optimizer().minimize(loss, ctx).run();
    last = loss.item();
    if (step == 0) first = last;
  }
  for (const Variable& v : store.variables()) {
    INFO(v.name);
    CHECK(v.value.dtype() != DType::kBF16);
  }
  return {first, last};
}

}  // namespace

TEST_CASE("mixed_precision: policies as Keras names them") {
  Policy mixed("mixed_bfloat16");
  CHECK(mixed.name() == "mixed_bfloat16");
  CHECK(mixed.compute_dtype() == DType::kBF16);
  CHECK(mixed.variable_dtype() == DType::kF32);
  CHECK(mixed.is_mixed());
  Policy f32("float32");
  CHECK(f32.compute_dtype() == DType::kF32);
  CHECK(f32.variable_dtype() == DType::kF32);
  CHECK_FALSE(f32.is_mixed());
  CHECK(Policy("bfloat16").variable_dtype() == DType::kBF16);
  CHECK(Policy("float64").compute_dtype() == DType::kF64);
  CHECK(message_of_unimplemented("mixed_float16").find("loss scaling") != std::string::npos);
  CHECK(message_of_unimplemented("mixed_float16").find("mixed_bfloat16") != std::string::npos);
  CHECK_THROWS_AS(Policy("float16"), UnimplementedError);
  CHECK_THROWS_AS(Policy("mixed_bf16"), InvalidArgumentError);
}

TEST_CASE("mixed_precision: the global policy is float32 until set, and a scope restores it") {
  CHECK(mixed_precision::global_policy().name() == "float32");
  {
    PolicyScope scope("mixed_bfloat16");
    CHECK(mixed_precision::global_policy() == Policy("mixed_bfloat16"));
  }
  CHECK(mixed_precision::global_policy().name() == "float32");
  mixed_precision::set_global_policy("mixed_bfloat16");
  CHECK(mixed_precision::global_policy().is_mixed());
  mixed_precision::set_global_policy(Policy("float32"));
  CHECK_FALSE(mixed_precision::global_policy().is_mixed());
  CHECK_THROWS_AS(mixed_precision::set_global_policy("mixed_float16"), UnimplementedError);
  CHECK(mixed_precision::global_policy().name() == "float32");
}

TEST_CASE("mixed_bfloat16 dense: float32 variables, bfloat16 output, float32 gradients") {
  PolicyScope scope("mixed_bfloat16");
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 1);
  Tensor x = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f}, {2, 3});
  Tensor y = dense(ctx, x, {.units = 4, .activation = relu});
  CHECK(y.dtype() == DType::kBF16);
  Tensor kernel = store.get("dense/kernel").value;
  Tensor bias = store.get("dense/bias").value;
  CHECK(kernel.dtype() == DType::kF32);
  CHECK(bias.dtype() == DType::kF32);
  // The output is the float32 computation on bfloat16-rounded operands, rounded once.
  Tensor x16 = ops::cast(ops::cast(x, DType::kBF16), DType::kF32);
  Tensor k16 = ops::cast(ops::cast(kernel, DType::kBF16), DType::kF32);
  Tensor expected = ops::relu(ops::matmul(x16, k16));
  std::vector<float> got = y.to_vector<float>(), want = expected.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1.0 / 256));
  }
  // The gradient reaches the float32 variables through the casts.
  std::vector<Tensor> grads = ops::gradients(ops::sum(y), {kernel, bias});
  CHECK(grads[0].dtype() == DType::kF32);
  CHECK(grads[1].dtype() == DType::kF32);
  CHECK(grads[0].shape() == kernel.shape());
  // An optimizer step updates the float32 variable in place.
  ctx.begin_call();
  const std::vector<float> before = store.get("dense/kernel").value.to_vector<float>();
  Tensor loss = sparse_softmax_cross_entropy(Tensor::from_vector<int64_t>({0, 3}),
                                             dense(ctx, x, {.units = 4}));
  CHECK(loss.dtype() == DType::kF32);
  optim::sgd(0.5).minimize(loss, ctx).run();
  Tensor after = store.get("dense/kernel").value;
  CHECK(after.dtype() == DType::kF32);
  CHECK(after.to_vector<float>() != before);
}

TEST_CASE("mixed_bfloat16: a layer given dtype float32 computes in float32") {
  PolicyScope scope("mixed_bfloat16");
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 1);
  Tensor x = Tensor::ones({2, 3});
  Tensor hidden = dense(ctx, x, {.units = 4});
  CHECK(hidden.dtype() == DType::kBF16);
  Tensor out = dense(ctx, hidden, {.units = 2, .dtype = "float32"});
  CHECK(out.dtype() == DType::kF32);
  CHECK(store.get("dense_1/kernel").value.dtype() == DType::kF32);
  // softmax as an activation runs in float32 on a bfloat16 layer
  Tensor probs = dense(ctx, x, {.units = 3, .activation = softmax});
  CHECK(probs.dtype() == DType::kF32);
  CHECK(ops::sum(probs).item() == doctest::Approx(2.0).epsilon(1e-6));
}

TEST_CASE("mixed_bfloat16 conv2d and batch normalization keep float32 variables") {
  PolicyScope scope("mixed_bfloat16");
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 3);
  ops::Generator generator(5);
  Tensor image = ops::random_uniform({2, 5, 5, 3}, -1.0, 1.0, generator);
  Tensor x = conv2d(ctx, image, {.filters = 4, .kernel = 3});
  CHECK(x.dtype() == DType::kBF16);
  CHECK(store.get("conv2d/kernel").value.dtype() == DType::kF32);
  Tensor normalized = batch_normalization(ctx, x);
  CHECK(normalized.dtype() == DType::kBF16);
  for (const char* name : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    INFO(name);
    CHECK(store.get(std::string("batch_normalization/") + name).value.dtype() == DType::kF32);
  }
  // statistics in float32: each channel of the output has mean ~0 and variance ~1
  Tensor wide = ops::cast(normalized, DType::kF32);
  Tensor mean = ops::mean(wide, {0, 1, 2});
  for (float m : mean.to_vector<float>()) CHECK(std::fabs(m) < 2e-2);
  // the moving mean moved towards the float32 batch mean of the bfloat16 conv output
  Tensor batch_mean = ops::mean(ops::cast(x, DType::kF32), {0, 1, 2});
  std::vector<float> moving = store.get("batch_normalization/moving_mean").value.to_vector<float>();
  std::vector<float> expected = batch_mean.to_vector<float>();
  for (size_t c = 0; c < moving.size(); ++c)
    CHECK(moving[c] == doctest::Approx(0.01 * expected[c]).epsilon(1e-4));
}

TEST_CASE("mixed_bfloat16 embedding: float32 table, bfloat16 rows") {
  PolicyScope scope("mixed_bfloat16");
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 3);
  Tensor rows =
      embedding(ctx, Tensor::from_vector<int64_t>({1, 0}), {.input_dim = 3, .output_dim = 2});
  CHECK(rows.dtype() == DType::kBF16);
  CHECK(store.get("embedding/embeddings").value.dtype() == DType::kF32);
}

TEST_CASE("losses cast bfloat16 predictions to float32") {
  Tensor logits =
      ops::cast(Tensor::from_vector<float>({2.0f, -1.0f, 0.5f, 0.25f}, {2, 2}), DType::kBF16);
  Tensor labels = Tensor::from_vector<int64_t>({0, 1});
  Tensor sparse = sparse_softmax_cross_entropy(labels, logits);
  CHECK(sparse.dtype() == DType::kF32);
  CHECK(
      sparse.item() ==
      doctest::Approx(sparse_softmax_cross_entropy(labels, ops::cast(logits, DType::kF32)).item()));
  Tensor onehot = Tensor::from_vector<float>({1, 0, 0, 1}, {2, 2});
  CHECK(softmax_cross_entropy(onehot, logits).dtype() == DType::kF32);
  CHECK(sigmoid_cross_entropy(onehot, logits).dtype() == DType::kF32);
  CHECK(mean_squared_error(onehot, logits).dtype() == DType::kF32);
  CHECK(huber(onehot, logits).dtype() == DType::kF32);
  // the gradient flows back to bfloat16 logits
  Tensor leaf = logits.clone();
  leaf.set_requires_grad(true);
  std::vector<Tensor> grads = ops::gradients(sparse_softmax_cross_entropy(labels, leaf), {leaf});
  CHECK(grads[0].dtype() == DType::kBF16);
}

// Both models must learn under mixed_bfloat16 as under float32: the loss falls as far (the
// factors of training_test.cpp) and ends within a stated distance of the float32 run's, which
// starts from the same float32 initial values.
TEST_CASE("the MLP trained under mixed_bfloat16 ends near its float32 loss") {
  Batch batch = make_blobs(128, 1);
  auto optimizer = [] { return optim::momentum(0.1, 0.9); };
  auto [f32_first, f32_last] = train("float32", mlp, optimizer, batch, 150, 42);
  auto [bf16_first, bf16_last] = train("mixed_bfloat16", mlp, optimizer, batch, 150, 42);
  MESSAGE("MLP loss float32 " << f32_first << " -> " << f32_last << ", mixed_bfloat16 "
                              << bf16_first << " -> " << bf16_last);
  CHECK(bf16_first == doctest::Approx(f32_first).epsilon(1e-2));
  CHECK(std::isfinite(bf16_last));
  CHECK(bf16_last < bf16_first / 10);
  CHECK(std::fabs(bf16_last - f32_last) < 0.02 + 0.25 * f32_last);
}

TEST_CASE("the CNN trained under mixed_bfloat16 ends near its float32 loss") {
  Batch batch = make_bars(64, 3);
  auto optimizer = [] { return optim::adam(0.01); };
  auto [f32_first, f32_last] = train("float32", cnn, optimizer, batch, 60, 7);
  auto [bf16_first, bf16_last] = train("mixed_bfloat16", cnn, optimizer, batch, 60, 7);
  MESSAGE("CNN loss float32 " << f32_first << " -> " << f32_last << ", mixed_bfloat16 "
                              << bf16_first << " -> " << bf16_last);
  CHECK(bf16_first == doctest::Approx(f32_first).epsilon(1e-2));
  CHECK(std::isfinite(bf16_last));
  CHECK(bf16_last < bf16_first / 20);
  CHECK(std::fabs(bf16_last - f32_last) < 0.02 + 0.25 * f32_last);
}
