// Replicated training must equal unreplicated training on the global batch. The reference is
// a plain ModelContext (no strategy) that takes the mean loss over the whole global batch; the
// replicas each take the mean loss over their slice divided by num_replicas_in_sync (the
// loss scaled by the global batch size), or leave the loss alone and pass
// 1 / num_replicas_in_sync as run_train_op's gradient scale (the Estimator's way), sum the
// gradients over replicas, and update: every mirrored copy, or the one central copy once.
// After every step the mirrored copies must be bitwise identical, and the central copy must
// be the one store every replica sees; after N steps the variables (optimizer slots included)
// must match the reference within |a - b| <= 2e-5 * (1 + |b|) (float32 sums in another order)
// and global_step must be N, not N times the replica count.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "nn/nn.h"
#include "tests/distribute/training_util.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::nn;
using namespace est::distribute;
using namespace est::testing;

namespace {

// How the step function applies the update.
enum class StepPath {
  kGradientTransform,   // train_op.run(replica.gradient_transform())
  kRunTrainOp,          // replica.run_train_op(train_op), the loss scaled by the global batch
  kRunTrainOpScaled,    // the mean loss, run_train_op(train_op, 1 / num_replicas_in_sync)
  kTrainOpRun,          // train_op.run(): the replica context synchronizes apply_gradients
  kApplyGradients,      // ops::gradients, then optimizer.apply_gradients(ctx, grads, vars)
  kAllReduceThenApply,  // replica.all_reduce_gradients, then apply_gradients (no second sum)
};

// Mirrored: every replica's copy bitwise equal to replica 0's. Central: one store for all.
void check_replicas(Strategy& strategy) {
  if (!strategy.variables_mirrored()) {
    for (int r = 1; r < strategy.num_replicas_in_sync(); ++r)
      CHECK(&strategy.store(r) == &strategy.store(0));
    return;
  }
  std::vector<Variable> first = strategy.store(0).variables();
  for (int r = 1; r < strategy.num_replicas_in_sync(); ++r) {
    CHECK(&strategy.store(r) != &strategy.store(0));
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
                       Shape global_shape, int steps,
                       StepPath path = StepPath::kGradientTransform) {
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
          Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, replica_logits);
          double share = 1.0 / replica.num_replicas_in_sync();
          if (path != StepPath::kRunTrainOpScaled) loss = loss * share;
          if (path == StepPath::kApplyGradients || path == StepPath::kAllReduceThenApply) {
            std::vector<Tensor> variables;
            for (const Variable& v : ctx.trainable_variables()) variables.push_back(v.value);
            std::vector<Tensor> gradients = ops::gradients(loss, variables);
            if (path == StepPath::kApplyGradients) {
              make_optimizer().apply_gradients(ctx, gradients, variables);
            } else {
              std::vector<GradAndVar> entries;
              for (size_t i = 0; i < variables.size(); ++i)
                entries.push_back({ctx.store().name_of(variables[i]), gradients[i], variables[i]});
              replica.all_reduce_gradients(entries);
              make_optimizer().apply_gradients(ctx, entries,
                                               {.experimental_aggregate_gradients = false});
            }
            return loss;
          }
          TrainOp train_op = make_optimizer().minimize(loss, ctx);
          switch (path) {
            case StepPath::kGradientTransform:
              train_op.run(replica.gradient_transform());
              break;
            case StepPath::kRunTrainOp:
              replica.run_train_op(train_op);
              break;
            case StepPath::kRunTrainOpScaled:
              replica.run_train_op(train_op, share);
              break;
            case StepPath::kTrainOpRun:
              train_op.run();
              break;
            case StepPath::kApplyGradients:
            case StepPath::kAllReduceThenApply:
              break;
          }
          return loss;
        },
        split_batch(batch, replicas));
    check_replicas(strategy);
  }
  // Applied once per step: not once per replica on a shared copy.
  for (int r = 0; r < replicas; ++r) CHECK(read_global_step(strategy.store(r)) == steps);
  // The same variables, optimizer slots included, each exactly once.
  CHECK(strategy.store(0).names() == reference_store.names());
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
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, std::make_shared<ReductionToOneDevice>(), kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::momentum(0.1, 0.9); }, {8, 5}, 10);
}

TEST_CASE("distribute: hierarchical copy over 3 replicas matches one replica (dense, Adam)") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1", "/cpu:2"},
                            std::make_shared<HierarchicalCopyAllReduce>(), kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::adam(0.01); }, {12, 5}, 8);
}

TEST_CASE("distribute: mirrored CNN on 2 CPU replicas matches one replica on the global batch") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, std::make_shared<HierarchicalCopyAllReduce>(),
                            kSeed);
  train_and_compare(
      strategy, cnn, [] { return optim::sgd(0.1); }, {8, 8, 8, 1}, 8);
}

TEST_CASE(
    "distribute: mirrored training through run_train_op matches one replica, every "
    "optimizer") {
  for (const NamedOptimizer& optimizer : all_optimizers()) {
    CAPTURE(optimizer.name);
    MirroredStrategy mlp_strategy({"/cpu:0", "/cpu:1"}, std::make_shared<ReductionToOneDevice>(),
                                  kSeed);
    train_and_compare(mlp_strategy, mlp, optimizer.make, {8, 5}, 6, StepPath::kRunTrainOp);
    MirroredStrategy cnn_strategy({"/cpu:0", "/cpu:1"}, std::make_shared<HierarchicalCopyAllReduce>(),
                                  kSeed);
    train_and_compare(cnn_strategy, cnn, optimizer.make, {8, 8, 8, 1}, 4,
                      StepPath::kRunTrainOpScaled);
  }
}

TEST_CASE("distribute: central storage on 2 CPU replicas matches one replica, every optimizer") {
  for (const NamedOptimizer& optimizer : all_optimizers()) {
    CAPTURE(optimizer.name);
    for (StepPath path : {StepPath::kRunTrainOp, StepPath::kRunTrainOpScaled}) {
      CAPTURE(int(path));
      CentralStorageStrategy mlp_strategy({"/cpu:0", "/cpu:1"}, kSeed);
      train_and_compare(mlp_strategy, mlp, optimizer.make, {8, 5}, 6, path);
      CentralStorageStrategy cnn_strategy({"/cpu:0", "/cpu:1"}, kSeed);
      train_and_compare(cnn_strategy, cnn, optimizer.make, {8, 8, 8, 1}, 4, path);
      // The slots live in the one store (train_and_compare checked that the names, and so
      // the count, are the reference's).
      if (!optimizer.slot.empty()) CHECK(cnn_strategy.store(1).contains(optimizer.slot));
    }
  }
}

TEST_CASE("distribute: central storage over 3 replicas matches one replica (dense, momentum)") {
  CentralStorageStrategy strategy({"/cpu:0", "/cpu:1", "/cpu:2"}, kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::momentum(0.1, 0.9); }, {12, 5}, 6, StepPath::kRunTrainOp);
}

TEST_CASE(
    "distribute: inside strategy.run, apply_gradients is synchronized however the step is "
    "written") {
  // TrainOp::run(), optimizer.apply_gradients with gradients from ops::gradients (summed by
  // the optimizer, or by all_reduce_gradients first), and the gradient_transform: each sums
  // over replicas once and updates as the strategy places the
  // variables (central storage: once, by replica 0).
  for (StepPath path : {StepPath::kGradientTransform, StepPath::kTrainOpRun,
                        StepPath::kApplyGradients, StepPath::kAllReduceThenApply}) {
    CAPTURE(int(path));
    CentralStorageStrategy central({"/cpu:0", "/cpu:1"}, kSeed);
    train_and_compare(
        central, mlp, [] { return optim::adam(0.01); }, {8, 5}, 5, path);
    MirroredStrategy mirrored({"/cpu:0", "/cpu:1", "/cpu:2"},
                              std::make_shared<HierarchicalCopyAllReduce>(), kSeed);
    train_and_compare(
        mirrored, cnn, [] { return optim::momentum(0.1, 0.9); }, {6, 8, 8, 1}, 4, path);
  }
}

TEST_CASE("distribute: OneDeviceStrategy trains exactly like the plain loop") {
  OneDeviceStrategy strategy("/cpu:0", kSeed);
  train_and_compare(
      strategy, mlp, [] { return optim::sgd(0.5); }, {6, 5}, 5);
}
