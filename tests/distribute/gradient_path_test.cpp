// GradientPath (distribute/gradient_path.h): a strategy takes its replicas' gradients through
// the path it was given, whatever way the step function hands them over (run_train_op,
// apply_gradients inside the step, the gradient transform). The path of the test's own
// (owner_applies_path.h) is shaped as a parameter server's: only the owner's copy is updated,
// the others pull fresh values before they read; trained on the same batches, the owner's
// variables (optimizer slots and moving statistics included) must be bitwise those of
// MirroredStrategy, whose copies are updated in place by the all-reduce path, and the other
// replicas' copies must equal the owner's once pulled. Where the variables live is a separate
// part (VariableHome, distribute/variable_home.h): a home of the test's own under the all-reduce
// path sees every read and new variable, and the update is MirroredStrategy's.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "nn/nn.h"
#include "tests/distribute/owner_applies_path.h"
#include "tests/distribute/training_util.h"

using namespace est;
using namespace est::nn;
using namespace est::distribute;
using namespace est::testing;

namespace {

enum class Handover { kRunTrainOp, kApplyGradients, kGradientTransform };

// A dense layer after batch normalization (moving statistics, deferred and averaged).
Tensor normalized_mlp(ModelContext& ctx, const Tensor& x) {
  Tensor h = batch_normalization(ctx, x, {.momentum = 0.9});
  return mlp(ctx, h);
}

void train(Strategy& strategy, Handover handover, int steps) {
  for (int step = 0; step < steps; ++step) {
    data::Element batch = make_batch({8, 5}, uint64_t(step));
    strategy.run(
        [&](ReplicaContext& replica) {
          ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = normalized_mlp(ctx, replica.input().features.at("x"));
          Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, logits) *
                        (1.0 / replica.num_replicas_in_sync());
          optim::Optimizer optimizer = optim::adam(0.01);
          if (handover == Handover::kApplyGradients) {
            std::vector<Tensor> variables;
            for (const Variable& v : ctx.trainable_variables()) variables.push_back(v.value);
            optimizer.apply_gradients(ctx, ops::gradients(loss, variables), variables);
          } else if (handover == Handover::kGradientTransform) {
            optimizer.minimize(loss, ctx).run(replica.gradient_transform());
          } else {
            replica.run_train_op(optimizer.minimize(loss, ctx));
          }
          return loss;
        },
        split_batch(batch, strategy.num_local_replicas()));
  }
}

// Every variable of `actual` bitwise equal to `expected`'s; with `all`, the same names too.
void check_equal(const VariableStore& actual, const VariableStore& expected, bool all = true) {
  if (all) REQUIRE(actual.names() == expected.names());
  for (const Variable& variable : actual.variables()) {
    CAPTURE(variable.name);
    CHECK(variable.value.to_vector<double>() ==
          expected.get(variable.name).value.to_vector<double>());
  }
}

// The replicas' own stores as the home (the chief's values: one process, one seed), counting
// what the replicas hand it.
class CountingHome final : public VariableHome {
 public:
  void before_step(ReplicaContext& /*replica*/) override { count("before_step"); }
  void initialize_variable(ReplicaContext& /*replica*/, const std::string& name,
                           Tensor& /*value*/) override {
    count("initialize " + name);
  }
  void read_variable(ReplicaContext& /*replica*/, const std::string& name, Tensor& /*value*/,
                     const Tensor* /*rows*/) override {
    count("read " + name);
  }
  int calls(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_[what];
  }

 private:
  void count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_[what];
  }
  std::mutex mutex_;
  std::map<std::string, int> calls_;
};

class HomedStrategy final : public Strategy {
 public:
  HomedStrategy(const std::vector<std::string>& devices, std::shared_ptr<VariableHome> home)
      : Strategy(parse_devices(devices), nullptr, kSeed, mirrored_placement(), nullptr,
                 std::move(home)) {}
  std::string_view name() const override { return "HomedStrategy"; }
};

}  // namespace

TEST_CASE("distribute: a strategy's variables live in its VariableHome, apart from the path") {
  const int steps = 3;
  MirroredStrategy mirrored({"/cpu:0", "/cpu:1"}, nullptr, kSeed);
  train(mirrored, Handover::kRunTrainOp, steps);
  auto home = std::make_shared<CountingHome>();
  HomedStrategy homed({"/cpu:0", "/cpu:1"}, home);
  CHECK(&homed.variable_home() == home.get());
  CHECK(homed.gradient_path().name() == "all-reduce");
  train(homed, Handover::kRunTrainOp, steps);
  // Each replica's step: before_step, a read of each variable the model uses; each variable
  // created once per replica, in the first step.
  CHECK(home->calls("before_step") == 2 * steps);
  CHECK(home->calls("initialize dense/kernel") == 2);
  CHECK(home->calls("read dense/kernel") == 2 * steps);
  // The all-reduce path updated the replicas' stores as under MirroredStrategy.
  check_equal(homed.store(0), mirrored.store(0));
  check_equal(homed.store(1), mirrored.store(1));
  CHECK(read_global_step(homed.store(0)) == steps);
}

TEST_CASE("distribute: a strategy's steps go through its gradient path, however handed over") {
  for (Handover handover :
       {Handover::kRunTrainOp, Handover::kApplyGradients, Handover::kGradientTransform}) {
    CAPTURE(int(handover));
    const int steps = 4;
    MirroredStrategy mirrored({"/cpu:0", "/cpu:1"}, nullptr, kSeed);
    train(mirrored, handover, steps);
    auto path = std::make_shared<OwnerAppliesPath>(2);
    OwnerAppliesStrategy owner({"/cpu:0", "/cpu:1"}, path, kSeed);
    CHECK(owner.gradient_path().name() == "owner applies");
    train(owner, handover, steps);

    // Each step's one run called before_step once per replica, and handed the gradients to the
    // path once per replica; replica 1 pulled before each step but the first.
    CHECK(path->before_steps() == 2 * steps);
    CHECK(path->pulls() == steps - 1);
    CHECK(path->applies() == (handover == Handover::kRunTrainOp ? 2 * steps : 0));
    CHECK(path->combines() == (handover == Handover::kRunTrainOp ? 0 : 2 * steps));
    // Only the owner applied the updates (global_step once per step); replica 1's copy is a
    // step behind until it pulls.
    CHECK(read_global_step(owner.store(0)) == steps);
    CHECK(owner.store(1).get("dense/kernel").value.to_vector<double>() !=
          owner.store(0).get("dense/kernel").value.to_vector<double>());
    check_equal(owner.store(0), mirrored.store(0));
    owner.run([](ReplicaContext&) { return Tensor(); });  // before_step: replica 1 pulls
    // The other copy holds the model's variables (not the optimizer's slots: the owner's).
    CHECK(owner.store(1).contains("dense/kernel"));
    check_equal(owner.store(1), owner.store(0), false);
  }
}

TEST_CASE("distribute: the all-reduce path is every built-in strategy's") {
  MirroredStrategy mirrored({"/cpu:0", "/cpu:1"});
  CentralStorageStrategy central({"/cpu:0", "/cpu:1"});
  OneDeviceStrategy one("/cpu:0");
  for (Strategy* strategy : std::vector<Strategy*>{&mirrored, &central, &one})
    CHECK(strategy->gradient_path().name() == "all-reduce");
}

TEST_CASE("distribute: TF1's loss scaling divides by the replicas unless the reduction is SUM") {
  // tf.compat.v1 Optimizer._scale_loss with get_loss_reduction: every reduction but SUM counts
  // as a mean (NONE too: TF cannot tell how the user reduced it); one replica scales nothing.
  for (Reduction mean : {Reduction::kNone, Reduction::kMean, Reduction::kSumOverBatchSize,
                         Reduction::kSumByNonzeroWeights}) {
    CHECK(loss_reduction_scale(mean, 4) == 0.25);
    CHECK(loss_reduction_scale(mean, 1) == 1.0);
  }
  CHECK(loss_reduction_scale(Reduction::kSum, 4) == 1.0);
  CHECK(loss_reduction_scale(Reduction::kSum, 1) == 1.0);
}
