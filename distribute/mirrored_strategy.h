// The in-process strategies: OneDeviceStrategy (one replica) and MirroredStrategy (one
// replica per local device). Both are the Strategy machinery with a device list and
// cross-device ops; devices are TensorFlow names ("/cpu:0", "/cpu:1", ... logical CPU devices
// are allowed, as in TensorFlow, so replication is testable without a GPU; two replicas on one
// GPU are not expressible, as there are no logical GPU devices: use "/gpu:0" and "/cpu:0").
#pragma once

#include <string>
#include <vector>

#include "distribute/strategy.h"

namespace est::distribute {

class OneDeviceStrategy : public Strategy {
 public:
  // `device`: "/cpu:0" (the parse error for a bad name). `seed` seeds the model context.
  explicit OneDeviceStrategy(const std::string& device = "/cpu:0", uint64_t seed = 0);
  std::string_view name() const override { return "OneDeviceStrategy"; }
};

class MirroredStrategy : public Strategy {
 public:
  // `devices`: distinct device names, one replica each (default: local_devices(), i.e. all
  // GPUs, else one CPU). `cross_device_ops` (default, as TF: NcclAllReduce when every device
  // is a GPU, else ReductionToOneDevice): e.g. std::make_shared<HierarchicalCopyAllReduce>().
  // NcclAllReduce on CPU devices is an InvalidArgumentError. Devices may mix GPUs and CPUs
  // ("/gpu:0", "/cpu:0"): the reductions then go through host copies. `seed` seeds every replica's
  // model context identically.
  explicit MirroredStrategy(const std::vector<std::string>& devices = local_devices(),
                            std::shared_ptr<CrossDeviceOps> cross_device_ops = nullptr,
                            uint64_t seed = 0);
  std::string_view name() const override { return "MirroredStrategy"; }
};

}  // namespace est::distribute
