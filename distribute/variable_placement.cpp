// The mirrored and central placements.
#include "distribute/variable_placement.h"

namespace est::distribute {
namespace {

class MirroredPlacement final : public VariablePlacement {
 public:
  std::string_view name() const override { return "mirrored"; }
  std::vector<std::unique_ptr<nn::VariableStore>> make_stores(
      const std::vector<ops::Device>& devices) const override {
    // Each replica's variables on its GPU; CPU devices share host memory, so theirs stay on
    // the host.
    std::vector<std::unique_ptr<nn::VariableStore>> stores;
    for (const ops::Device& device : devices)
      stores.push_back(
          std::make_unique<nn::VariableStore>(device.is_cuda() ? device : ops::Device::cpu()));
    return stores;
  }
  size_t store_index(int replica) const override { return static_cast<size_t>(replica); }
  bool shared() const override { return false; }
  bool applies_updates(int /*replica*/) const override { return true; }
};

class CentralPlacement final : public VariablePlacement {
 public:
  std::string_view name() const override { return "central"; }
  std::vector<std::unique_ptr<nn::VariableStore>> make_stores(
      const std::vector<ops::Device>& /*devices*/) const override {
    std::vector<std::unique_ptr<nn::VariableStore>> stores;
    stores.push_back(std::make_unique<nn::VariableStore>(ops::Device::cpu()));
    return stores;
  }
  size_t store_index(int /*replica*/) const override { return 0; }
  bool shared() const override { return true; }
  bool applies_updates(int replica) const override { return replica == 0; }
  std::string describe() const override { return " and variables on /cpu:0"; }
};

}  // namespace

std::shared_ptr<const VariablePlacement> mirrored_placement() {
  return std::make_shared<const MirroredPlacement>();
}

std::shared_ptr<const VariablePlacement> central_placement() {
  return std::make_shared<const CentralPlacement>();
}

}  // namespace est::distribute
