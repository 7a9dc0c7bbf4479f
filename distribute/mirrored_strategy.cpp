// OneDeviceStrategy and MirroredStrategy: parse the device names, hand them to Strategy.
#include "distribute/mirrored_strategy.h"

namespace est::distribute {

OneDeviceStrategy::OneDeviceStrategy(const std::string& device, uint64_t seed)
    : Strategy({Device::parse(device)}, CrossDeviceOps::kReductionToOneDevice, seed) {}

MirroredStrategy::MirroredStrategy(const std::vector<std::string>& devices,
                                   CrossDeviceOps cross_device_ops, uint64_t seed)
    : Strategy(parse_devices(devices), cross_device_ops, seed) {}

}  // namespace est::distribute
