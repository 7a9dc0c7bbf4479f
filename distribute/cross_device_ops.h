// Cross-device ops: how MirroredStrategy combines the replicas' gradient tensors.
//
// Each replica hands over its list of tensors (the same shapes, dtypes and order on every
// replica); after all_reduce every replica's list holds the reduced values, in that
// replica's own buffers. ReductionToOneDevice sums into a buffer of replica 0 and copies the
// result out; HierarchicalCopyAllReduce sums pairwise up a binary tree (r0+=r1, r2+=r3, then
// r0+=r2, ...) and copies the root back down. NcclAllReduce needs GPU devices.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/device.h"
#include "ops/tensor.h"

namespace est::distribute {

enum class ReduceOp : uint8_t { kSum, kMean };

enum class CrossDeviceOps : uint8_t {
  kReductionToOneDevice,
  kHierarchicalCopyAllReduce,
  kNcclAllReduce,
};

std::string_view cross_device_ops_name(CrossDeviceOps ops);

// InvalidArgumentError when `ops` cannot run on `devices` (NCCL on CPU devices).
void check_cross_device_ops(CrossDeviceOps ops, const std::vector<ops::Device>& devices);

// per_replica[r] is replica r's list of tensors (undefined entries: no gradient, they must be
// undefined on every replica). Reduces element-wise over replicas, in place: afterwards every
// replica's tensors hold the sum (or mean). float32 and float64 only (InvalidArgumentError).
void all_reduce(CrossDeviceOps ops, ReduceOp op,
                std::vector<std::vector<ops::Tensor>*>& per_replica);

// The same reduction shared out over the replica threads (what ReplicaContext::all_reduce
// runs): inputs[r] is replica r's list, outputs[r] its list of fresh buffers of the same shapes
// (undefined where the input is; replicas may pass the same list, which is then written once).
// Entry i's sum over replicas is multiplied by factors[i] (1: kSum, 1/replicas: kMean; a gradient's
// loss scale can ride along at no extra pass). The elements of all tensors, taken as one sequence,
// are cut into `num_slices` equal ranges; the call for `slice` reduces its range (additions in the
// order `ops` prescribes, so the result is bitwise that of all_reduce) and writes it into every
// replica's outputs. Every replica validates the lists first (the errors of all_reduce).
void all_reduce_slice(CrossDeviceOps ops, const std::vector<double>& factors,
                      const std::vector<std::vector<ops::Tensor>*>& inputs,
                      const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                      int num_slices);

}  // namespace est::distribute
