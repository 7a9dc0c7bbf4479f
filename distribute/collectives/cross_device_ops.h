// Cross-device ops: how a strategy combines its replicas' tensors (tf.distribute's
// CrossDeviceOps), as one interface with an implementation per algorithm and transport.
//
// A collective runs in two parts. reduce_slice() runs on every local replica thread: each
// reduces its share of the elements over the replicas of this process into one set of result
// buffers (the replicas are threads of one process, so they share them). Then, on one thread,
// reduce_across_workers() combines those local results with the other processes of a
// multi-worker job (nothing to do in one process). So the hierarchy (local replicas first,
// then one cross-process reduction per worker) lives here, and the loops above never know
// which transport ran.
//
// In-process algorithms: ReductionToOneDevice sums into replica 0's buffer in replica order;
// HierarchicalCopyAllReduce sums pairwise up a binary tree (r0+=r1, r2+=r3, then r0+=r2, ...);
// NcclAllReduce needs GPU devices; the first two take GPU tensors through host copies.
// CollectiveAllReduce (distribute/collectives/collective_all_reduce.h) adds the ring across workers
// to a local algorithm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/device.h"
#include "ops/tensor.h"

namespace est::distribute {

enum class ReduceOp : uint8_t { kSum, kMean };

// A cross-worker reduction started in the background (CrossDeviceOps::start_reduce).
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  // Blocks until it is done: the sums, in fresh tensors (undefined where the input is).
  // Rethrows its error.
  virtual std::vector<ops::Tensor> wait() = 0;
};

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  virtual std::string_view name() const = 0;  // "ReductionToOneDevice"
  // InvalidArgumentError when these ops cannot run on `devices` (NCCL on CPU devices).
  virtual void check_devices(const std::vector<ops::Device>& devices) const;

  // The in-process part, shared out over the replica threads: inputs[r] is local replica r's
  // list, outputs[r] its list of fresh buffers of the same shapes (undefined where the input
  // is; replicas may pass the same list, which is then written once). Entry i's sum over the
  // local replicas is multiplied by factors[i] (a mean's 1/replicas or a loss scale rides along
  // at no extra pass). The elements of all tensors, taken as one sequence, are cut into
  // `num_slices` equal ranges; the call for `slice` reduces its range (additions in the order
  // of the algorithm, so the result is bitwise that of one slice) and writes it into every
  // replica's outputs. Every call validates the lists first: InvalidArgumentError when they
  // differ between replicas or hold non-floating tensors.
  virtual void reduce_slice(const std::vector<double>& factors,
                            const std::vector<std::vector<ops::Tensor>*>& inputs,
                            const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                            int num_slices) const = 0;

  // The cross-process part, on one thread after reduce_slice: `sums` (this process's results,
  // undefined entries skipped) become the sums over every worker. `what` names the operation in
  // messages ("all-reduce at step 812").
  virtual void reduce_across_workers(std::vector<ops::Tensor>& /*sums*/,
                                     const std::string& /*what*/) {}
  // The same for one local replica's own tensors, scaled on the way: `tensors` (only read,
  // undefined entries skipped) become fresh tensors holding the sum over every worker of
  // factors[i] x tensors[i]. Host tensors only. The default scales into fresh buffers, then
  // calls reduce_across_workers; the ring does both in one pass.
  virtual void reduce_scaled_across_workers(std::vector<ops::Tensor>& tensors,
                                            const std::vector<double>& factors,
                                            const std::string& what);
  // Copies the chief's `values` (byte for byte) into every worker's.
  virtual void broadcast_from_chief(std::vector<ops::Tensor>& /*values*/,
                                    const std::string& /*what*/) {}
  // Every worker's `mine`, by worker index.
  virtual std::vector<std::string> all_gather_across_workers(const std::string& mine,
                                                             const std::string& /*what*/) {
    return {mine};
  }
  // Starts reducing `inputs` times `factors` across workers in the background, in the order
  // of the calls (every worker must start the same reductions in the same order), so that a
  // step can go on computing while its first gradients travel. `inputs` are only read. The
  // default does the work at once.
  virtual std::unique_ptr<PendingReduction> start_reduce(std::vector<ops::Tensor> inputs,
                                                         std::vector<double> factors,
                                                         std::string what);
  // Whether reduce_across_workers and start_reduce take tensors on GPUs as they are (NCCL);
  // otherwise the strategy hands them host copies.
  virtual bool reduces_device_tensors() const { return false; }
  virtual int num_workers() const { return 1; }
  virtual int worker_index() const { return 0; }
};

class ReductionToOneDevice : public CrossDeviceOps {
 public:
  std::string_view name() const override { return "ReductionToOneDevice"; }
  void reduce_slice(const std::vector<double>& factors,
                    const std::vector<std::vector<ops::Tensor>*>& inputs,
                    const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                    int num_slices) const override;
};

class HierarchicalCopyAllReduce : public CrossDeviceOps {
 public:
  std::string_view name() const override { return "HierarchicalCopyAllReduce"; }
  void reduce_slice(const std::vector<double>& factors,
                    const std::vector<std::vector<ops::Tensor>*>& inputs,
                    const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                    int num_slices) const override;
};

// tf.distribute.NcclAllReduce: one NCCL all-reduce per tensor over the local GPUs, issued by
// one replica thread between ncclGroupStart/End on each device's compute stream (the other
// threads wait at the strategy's barrier), then the factor applied on each device (sum, then
// scale, as the CPU algorithms). The communicators (ncclCommInitAll) are made once per device
// list and kept for the process. Needs distinct physical GPUs (NCCL refuses two ranks on one
// device); on CPU devices or without the CUDA backend, InvalidArgumentError at construction
// of the strategy.
class NcclAllReduce : public CrossDeviceOps {
 public:
  std::string_view name() const override { return "NcclAllReduce"; }
  void check_devices(const std::vector<ops::Device>& devices) const override;
  void reduce_slice(const std::vector<double>& factors,
                    const std::vector<std::vector<ops::Tensor>*>& inputs,
                    const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                    int num_slices) const override;
};

// per_replica[r] is replica r's list of tensors (undefined entries: no gradient, they must be
// undefined on every replica). Reduces element-wise over replicas with `ops`' in-process
// algorithm, in place: afterwards every replica's tensors hold the sum (or mean) in fresh
// buffers of its own. float32 and float64 only (InvalidArgumentError).
void all_reduce(const CrossDeviceOps& ops, ReduceOp op,
                std::vector<std::vector<ops::Tensor>*>& per_replica);

}  // namespace est::distribute
