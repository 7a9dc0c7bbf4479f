// CentralStorageStrategy: the Strategy machinery with one shared VariableStore.
#include "distribute/central_storage_strategy.h"

namespace est::distribute {

CentralStorageStrategy::CentralStorageStrategy(const std::vector<std::string>& compute_devices,
                                               uint64_t seed)
    : Strategy(parse_devices(compute_devices), nullptr, seed, central_placement()),
      variable_device_(Device::parse("/cpu:0")) {}

}  // namespace est::distribute
