// Two small models must learn with a fixed seed, driven the way the Estimator drives a
// model_fn: begin_call, forward, minimize, run.
//   MLP on two Gaussian blobs in 2-D: the loss falls at least 10-fold in 150 steps.
//   CNN on 8x8 images of a horizontal or vertical bar: the loss falls at least 20-fold in
//   60 steps and the eval-mode accuracy is above 95%.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "nn/nn.h"
#include "tests/nn/toy_problems.h"

using namespace est;
using namespace est::nn;
using est::testing::Batch;
using est::testing::make_bars;
using est::testing::make_blobs;
using est::testing::mlp;

namespace {

// The model_fn of DESIGN.md, scaled down.
Tensor cnn(ModelContext& ctx, const Tensor& image) {
  Tensor x = conv2d(ctx, image, {.filters = 8, .kernel = 3, .activation = relu});
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 16, .activation = relu});
  return dense(ctx, x, {.units = 2});
}

// One training step; returns the loss before the update.
template <class Model, class MakeOptimizer>
double train_step(ModelContext& ctx, Model model, MakeOptimizer make_optimizer,
                  const Batch& batch) {
  ctx.begin_call();
  Tensor logits = model(ctx, batch.features);
  Tensor loss = sparse_softmax_cross_entropy(batch.labels, logits);
  TrainOp train_op = make_optimizer().minimize(loss, ctx);
  train_op.run();
  return loss.item();
}

template <class Model>
double accuracy(ModelContext& ctx, Model model, const Batch& batch) {
  ctx.begin_call();
  ctx.set_mode(Mode::kEval);
  ops::NoGradGuard no_grad;
  Tensor logits = model(ctx, batch.features);
  std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();
  std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
  int correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
  ctx.set_mode(Mode::kTrain);
  return double(correct) / double(labels.size());
}

}  // namespace

TEST_CASE("an MLP separates two blobs: loss falls at least 10-fold") {
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 42);
  Batch batch = make_blobs(128, 1);
  auto optimizer = [] { return optim::momentum(0.1, 0.9); };
  double first = train_step(ctx, mlp, optimizer, batch);
  double last = first;
  for (int step = 1; step < 150; ++step) last = train_step(ctx, mlp, optimizer, batch);
  MESSAGE("MLP loss " << first << " -> " << last);
  CHECK(std::isfinite(last));
  CHECK(last < first / 10);
  CHECK(ctx.global_step() == 150);
  CHECK(accuracy(ctx, mlp, make_blobs(200, 2)) > 0.95);
}

TEST_CASE("the CNN learns horizontal from vertical bars: loss falls at least 20-fold") {
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 7);
  Batch batch = make_bars(64, 3);
  auto optimizer = [] { return optim::adam(0.01); };
  double first = train_step(ctx, cnn, optimizer, batch);
  double last = first;
  for (int step = 1; step < 60; ++step) last = train_step(ctx, cnn, optimizer, batch);
  MESSAGE("CNN loss " << first << " -> " << last);
  CHECK(std::isfinite(last));
  CHECK(last < first / 20);
  CHECK(accuracy(ctx, cnn, make_bars(100, 4)) > 0.95);
  // Adam's state is in the store, as a checkpoint would capture it.
  CHECK(store.contains("conv2d/kernel/Adam"));
  CHECK(store.contains("dense_1/bias/Adam_1"));
  CHECK(store.contains("beta1_power"));
}
