// VariablePlacement (distribute/variable_placement.h): the mirrored and central placements'
// answers, and a strategy built on a placement of the test's own, which must store, update and
// describe its variables as that placement says.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "nn/nn.h"
#include "ops/math.h"

using namespace est;
using namespace est::distribute;

namespace {

// A placement of the test's own: one store on the host, shared, updated by the last replica
// (central storage's is updated by replica 0): a strategy takes any VariablePlacement.
class LastReplicaUpdates final : public VariablePlacement {
 public:
  explicit LastReplicaUpdates(int replicas) : replicas_(replicas) {}
  std::string_view name() const override { return "last replica updates"; }
  std::vector<std::unique_ptr<nn::VariableStore>> make_stores(
      const std::vector<Device>& /*devices*/) const override {
    std::vector<std::unique_ptr<nn::VariableStore>> stores;
    stores.push_back(std::make_unique<nn::VariableStore>());
    return stores;
  }
  size_t store_index(int /*replica*/) const override { return 0; }
  bool shared() const override { return true; }
  bool applies_updates(int replica) const override { return replica == replicas_ - 1; }
  std::string describe() const override { return " and variables updated by the last replica"; }

 private:
  int replicas_;
};

class PlacedStrategy final : public Strategy {
 public:
  PlacedStrategy(const std::vector<std::string>& devices,
                 std::shared_ptr<const VariablePlacement> placement)
      : Strategy(parse_devices(devices), nullptr, 0, std::move(placement)) {}
  std::string_view name() const override { return "PlacedStrategy"; }
};

}  // namespace

TEST_CASE("distribute: a strategy places its variables through a VariablePlacement") {
  std::vector<Device> cpus{Device::cpu(0), Device::cpu(1)};
  auto mirrored = mirrored_placement();
  CHECK(mirrored->make_stores(cpus).size() == 2);
  CHECK(mirrored->store_index(1) == 1);
  CHECK(mirrored->applies_updates(0));
  CHECK(mirrored->applies_updates(1));
  CHECK_FALSE(mirrored->shared());
  auto central = central_placement();
  CHECK(central->make_stores(cpus).size() == 1);
  CHECK(central->store_index(1) == 0);
  CHECK(central->applies_updates(0));
  CHECK_FALSE(central->applies_updates(1));
  CHECK(central->shared());

  PlacedStrategy strategy({"/cpu:0", "/cpu:1", "/cpu:2"}, std::make_shared<LastReplicaUpdates>(3));
  CHECK(strategy.description() ==
        "PlacedStrategy with devices (/cpu:0, /cpu:1, /cpu:2) and variables updated by the last "
        "replica");
  CHECK(&strategy.store(0) == &strategy.store(2));
  CHECK_FALSE(strategy.variables_mirrored());
  // One SGD(0.5) step from w = [1, 1], each replica's loss sum(w) / 3: the summed gradient is
  // [1, 1], applied once, by replica 2, while the others wait for it.
  std::vector<int> applies(3, -1);
  strategy.run([&](ReplicaContext& replica) {
    nn::ModelContext& ctx = replica.model_context();
    ctx.begin_call();
    Tensor w = ctx.get_variable("w", {2}, DType::kF32, nn::constant(1.0));
    Tensor loss = ops::mul(ops::sum(w), 1.0 / replica.num_replicas_in_sync());
    applies[static_cast<size_t>(replica.replica_id())] = replica.applies_updates() ? 1 : 0;
    replica.run_train_op(optim::sgd(0.5).minimize(loss, ctx));
    return loss;
  });
  CHECK(applies == std::vector<int>{0, 0, 1});
  CHECK(strategy.store(0).get("w").value.to_vector<float>() == std::vector<float>{0.5f, 0.5f});
  CHECK(nn::read_global_step(strategy.store(0)) == 1);
}
