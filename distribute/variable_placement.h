// VariablePlacement: where a strategy's variables live and which replicas update them, the
// part of a strategy that TF spreads over variable creator scopes and replica_device_setter.
//
// A strategy is its devices, its cross-device ops and its placement; the replicas' steps are
// the same code under every placement. Mirrored: a copy per replica, on the replica's device
// (CPU devices share host memory), each updated by its own replica with the same summed
// gradients, so the copies stay equal. Central storage: one copy on the host that every
// replica reads; replica 0 applies the update while the others wait. A placement on parameter
// servers (the variables on `ps` tasks, a worker's store a cache of them, the updates applied
// by their owner) is another implementation of the same interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/variable_store.h"
#include "ops/device.h"

namespace est::distribute {

class VariablePlacement {
 public:
  virtual ~VariablePlacement() = default;
  virtual std::string_view name() const = 0;  // "mirrored", for messages

  // The stores of a new set of replicas on `devices` (one replica per device): one per
  // replica, or fewer that replicas share (see store_index).
  virtual std::vector<std::unique_ptr<nn::VariableStore>> make_stores(
      const std::vector<ops::Device>& devices) const = 0;
  // The store (an index into make_stores' result) that replica `replica` computes with.
  virtual size_t store_index(int replica) const = 0;
  // Whether replicas share a store (their model contexts then keep their initializer streams
  // in step, and a replica that does not apply an update waits until it is applied).
  virtual bool shared() const = 0;
  // Whether replica `replica` applies the updates to its store.
  virtual bool applies_updates(int replica) const = 0;
  // Appended to the strategy's description: " and variables on /cpu:0" (or nothing).
  virtual std::string describe() const { return {}; }
};

// A copy per replica (MirroredStrategy, MultiWorkerMirroredStrategy, OneDeviceStrategy).
std::shared_ptr<const VariablePlacement> mirrored_placement();
// One copy on the host, shared (CentralStorageStrategy).
std::shared_ptr<const VariablePlacement> central_placement();

}  // namespace est::distribute
