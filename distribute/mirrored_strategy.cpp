// OneDeviceStrategy and MirroredStrategy: parse the device names, hand them to Strategy with
// the default cross-device ops for them.
#include "distribute/mirrored_strategy.h"

namespace est::distribute {

OneDeviceStrategy::OneDeviceStrategy(const std::string& device, uint64_t seed)
    : Strategy({Device::parse(device)}, nullptr, seed) {}

namespace {

// TF's choice (mirrored_strategy.py, cross_device_ops.py's select_cross_device_ops): NCCL when
// every device is a GPU and this build has it, else ReductionToOneDevice.
std::shared_ptr<CrossDeviceOps> default_cross_device_ops(const std::vector<Device>& devices) {
#if EST_HAVE_CUDA
  if (devices.size() > 1 && all_gpus(devices)) return std::make_shared<NcclAllReduce>();
#else
  (void)devices;
#endif
  return std::make_shared<ReductionToOneDevice>();
}

}  // namespace

MirroredStrategy::MirroredStrategy(const std::vector<std::string>& devices,
                                   std::shared_ptr<CrossDeviceOps> cross_device_ops, uint64_t seed)
    : Strategy(parse_devices(devices),
               cross_device_ops ? std::move(cross_device_ops)
                                : default_cross_device_ops(parse_devices(devices)),
               seed) {}

}  // namespace est::distribute
