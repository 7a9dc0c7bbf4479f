// Mirrored training must equal unreplicated training on the global batch. The reference is a
// plain ModelContext (no strategy) that takes the mean loss over the whole global batch; the
// replicas each take the mean loss over their slice divided by num_replicas_in_sync (the
// loss scaled by the global batch size), all-reduce (sum) the gradients, and update. After
// every step the replicas' variables must be bitwise identical; after N steps they must match
// the reference within |a - b| <= 2e-5 * (1 + |b|) (float32 sums in another order).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "distribute/distribute.h"
#include "nn/nn.h"

using namespace est;
using namespace est::nn;
using namespace est::distribute;

namespace {

using Model = std::function<Tensor(ModelContext&, const Tensor&)>;
using MakeOptimizer = std::function<optim::Optimizer()>;

constexpr uint64_t kSeed = 42;
constexpr double kTolerance = 2e-5;

Tensor mlp(ModelContext& ctx, const Tensor& x) {
  Tensor h = dense(ctx, x, {.units = 8, .activation = relu});
  return dense(ctx, h, {.units = 3});
}

Tensor cnn(ModelContext& ctx, const Tensor& image) {
  Tensor x = conv2d(ctx, image, {.filters = 4, .kernel = 3, .activation = relu});
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 8, .activation = relu});
  return dense(ctx, x, {.units = 3});
}

// A deterministic global batch for step `step`: features of `feature_shape` (batch first) and
// labels in [0, 3).
data::Element make_batch(Shape feature_shape, uint64_t step) {
  ops::Generator generator(1000 + step);
  int64_t n = 1;
  for (int64_t d : feature_shape) n *= d;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = float(generator.next_normal());
  std::vector<int64_t> y;
  for (int64_t i = 0; i < feature_shape[0]; ++i) y.push_back(int64_t(generator.next_u64() % 3));
  return data::Element({{"x", Tensor::from_vector<float>(x, feature_shape)}},
                       Tensor::from_vector<int64_t>(y));
}

double max_scaled_difference(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i)
    worst = std::max(worst, std::abs(va[i] - vb[i]) / (1 + std::abs(vb[i])));
  return worst;
}

void check_mirrored(Strategy& strategy) {
  std::vector<Variable> first = strategy.store(0).variables();
  for (int r = 1; r < strategy.num_replicas_in_sync(); ++r) {
    std::vector<Variable> other = strategy.store(r).variables();
    REQUIRE(other.size() == first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      CAPTURE(first[i].name);
      CHECK(other[i].name == first[i].name);
      CHECK(other[i].value.to_vector<double>() == first[i].value.to_vector<double>());
    }
  }
}

void train_and_compare(Strategy& strategy, const Model& model, const MakeOptimizer& make_optimizer,
                       Shape global_shape, int steps) {
  VariableStore reference_store;
  ModelContext reference(reference_store, Mode::kTrain, kSeed);
  int replicas = strategy.num_replicas_in_sync();
  for (int step = 0; step < steps; ++step) {
    data::Element batch = make_batch(global_shape, uint64_t(step));

    reference.begin_call();
    Tensor logits = model(reference, batch.features.at("x"));
    make_optimizer().minimize(sparse_softmax_cross_entropy(batch.labels, logits), reference).run();

    strategy.run(
        [&](ReplicaContext& replica) {
          ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor replica_logits = model(ctx, replica.input().features.at("x"));
          Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, replica_logits) *
                        (1.0 / replica.num_replicas_in_sync());
          TrainOp train_op = make_optimizer().minimize(loss, ctx);
          train_op.run(replica.gradient_transform());
          return loss;
        },
        split_batch(batch, replicas));
    check_mirrored(strategy);
  }
  CHECK(read_global_step(strategy.store(replicas - 1)) == steps);
  std::vector<Variable> expected = reference_store.variables();
  std::vector<Variable> actual = strategy.store(0).variables();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(expected[i].name);
    CHECK(actual[i].name == expected[i].name);
    CHECK(max_scaled_difference(actual[i].value, expected[i].value) <= kTolerance);
  }
  // The variables moved: the comparison is not between two untouched initialisations.
  VariableStore fresh_store;
  ModelContext fresh(fresh_store, Mode::kTrain, kSeed);
  model(fresh, make_batch(global_shape, 0).features.at("x"));
  CHECK(max_scaled_difference(fresh_store.get("dense/kernel").value,
                              strategy.store(0).get("dense/kernel").value) > 1e-3);
}

}  // namespace

TEST_CASE(
    "distribute: mirrored dense model on 2 CPU replicas matches one replica on the global batch") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, CrossDeviceOps::kReductionToOneDevice, kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::momentum(0.1, 0.9); }, {8, 5}, 10);
}

TEST_CASE("distribute: hierarchical copy over 3 replicas matches one replica (dense, Adam)") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1", "/cpu:2"},
                            CrossDeviceOps::kHierarchicalCopyAllReduce, kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::adam(0.01); }, {12, 5}, 8);
}

TEST_CASE("distribute: mirrored CNN on 2 CPU replicas matches one replica on the global batch") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, CrossDeviceOps::kHierarchicalCopyAllReduce,
                            kSeed);
  train_and_compare(
      strategy, cnn, [] { return optim::sgd(0.1); }, {8, 8, 8, 1}, 8);
}

TEST_CASE("distribute: OneDeviceStrategy trains exactly like the plain loop") {
  OneDeviceStrategy strategy("/cpu:0", kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::sgd(0.5); }, {6, 5}, 5);
}
