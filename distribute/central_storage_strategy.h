// CentralStorageStrategy (tf.distribute.experimental.CentralStorageStrategy): one copy of
// every variable, on the CPU, shared by all replicas; the computation is replicated over the
// local compute devices, each replica on its own thread; gradients are summed on the CPU and
// the update is applied once. In one process with CPU devices the "CPU copy" is one
// VariableStore that every replica's ModelContext refers to.
#pragma once

#include <string>
#include <vector>

#include "distribute/strategy.h"

namespace est::distribute {

class CentralStorageStrategy : public Strategy {
 public:
  // `compute_devices`: distinct device names, one replica each (default: local_devices()).
  // Gradients are reduced with ReductionToOneDevice onto the variables' device.
  explicit CentralStorageStrategy(const std::vector<std::string>& compute_devices = local_devices(),
                                  uint64_t seed = 0);
  std::string_view name() const override { return "CentralStorageStrategy"; }
  // Where the variables live: "/cpu:0".
  const Device& variable_device() const { return variable_device_; }

 private:
  Device variable_device_;
};

}  // namespace est::distribute
