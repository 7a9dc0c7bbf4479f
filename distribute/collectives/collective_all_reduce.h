// CollectiveAllReduce: the cross-device ops of MultiWorkerMirroredStrategy (TensorFlow's name
// for them): a local algorithm over this process's replicas, then the ring across the workers
// of the job (distribute/net/ring.h) on the local results.
//
// A step can also start reductions in the background (start_reduce): a communication thread
// runs them in the order they were started, while the step computes the rest of its gradients.
//
// Many small gradients are packed: the tensors of a pack (at most bytes_per_pack bytes, one
// dtype) are reduced with one ring all-reduce over their spans, where they are, as
// CommunicationOptions(bytes_per_pack) and Horovod's fusion buffer do (a pack whose tensors
// share memory goes through a copy). Packing changes no result: the ring sums each element in
// the same order whatever its neighbours. A replica's own gradients (one replica per worker,
// or a background reduction) are not copied at all: the ring reads them, scales them where it
// first reads them and writes the sums into fresh tensors.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/collectives/cross_device_ops.h"

namespace est::distribute {

class ClusterRuntime;

// TensorFlow's tf.distribute.experimental.CommunicationImplementation.
enum class CommunicationImplementation : uint8_t { kAuto, kRing, kNccl };
std::string_view communication_name(CommunicationImplementation implementation);
// What a worker with `devices` uses for `requested`: NCCL without a GPU among them (or
// without a usable CUDA backend) is a FailedPreconditionError naming the devices and why;
// AUTO is NCCL when every device is a GPU and the build has CUDA, else RING (TensorFlow's rule).
// CollectiveAllReduce itself is the RING transport (host tensors); NCCL's is
// make_nccl_collective_all_reduce (distribute/collectives/nccl_collective_all_reduce.h).
CommunicationImplementation resolve_communication(CommunicationImplementation requested,
                                                  const std::vector<ops::Device>& devices);

// tf.distribute.experimental.CommunicationOptions.
struct CommunicationOptions {
  // Packs of this many bytes at most; 0: chosen automatically (32 MiB).
  int64_t bytes_per_pack = 0;
  // A collective that takes longer fails with DeadlineExceededError naming it (unset: no limit;
  // dead or stopped tasks are detected by heartbeats either way).
  std::optional<double> timeout_seconds;
  CommunicationImplementation implementation = CommunicationImplementation::kAuto;
};

inline constexpr int64_t kDefaultBytesPerPack = int64_t{32} << 20;

class CollectiveAllReduce : public CrossDeviceOps {
 public:
  // `local` reduces over this process's replicas (default ReductionToOneDevice).
  CollectiveAllReduce(std::shared_ptr<ClusterRuntime> runtime, CommunicationOptions options,
                      std::shared_ptr<CrossDeviceOps> local = nullptr);

  std::string_view name() const override { return "CollectiveAllReduce"; }
  void check_devices(const std::vector<ops::Device>& devices) const override;
  void reduce_slice(const std::vector<double>& factors,
                    const std::vector<std::vector<ops::Tensor>*>& inputs,
                    const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                    int num_slices) const override;
  void reduce_across_workers(std::vector<ops::Tensor>& sums, const std::string& what) override;
  void reduce_scaled_across_workers(std::vector<ops::Tensor>& tensors,
                                    const std::vector<double>& factors,
                                    const std::string& what) override;
  void broadcast_from_chief(std::vector<ops::Tensor>& values, const std::string& what) override;
  std::vector<std::string> all_gather_across_workers(const std::string& mine,
                                                     const std::string& what) override;
  // On a communication thread of its own, in the order of the calls.
  std::unique_ptr<PendingReduction> start_reduce(std::vector<ops::Tensor> inputs,
                                                 std::vector<double> factors,
                                                 std::string what) override;
  int num_workers() const override;
  int worker_index() const override;
  ~CollectiveAllReduce() override;

  ClusterRuntime& runtime() { return *runtime_; }
  const CommunicationOptions& options() const { return options_; }

  struct Job;  // a background reduction (collective_all_reduce.cpp)

 private:
  // Sums `tensors` across workers in place, packing small ones through `pack`.
  void sum_in_place(std::vector<ops::Tensor*>& tensors, std::vector<char>& pack,
                    const std::string& what);
  // Fresh sums across workers of factors[i] x inputs[i] (only read; undefined entries stay
  // undefined), packed as sum_in_place packs, scaled inside the ring's reduce-scatter.
  std::vector<ops::Tensor> sum_scaled(const std::vector<ops::Tensor>& inputs,
                                      const std::vector<double>& factors, const std::string& what);
  void communication_loop();

  std::shared_ptr<ClusterRuntime> runtime_;
  CommunicationOptions options_;
  std::shared_ptr<CrossDeviceOps> local_;
  std::vector<char> pack_;  // reused between collectives on the caller's thread

  // The background reductions (started lazily).
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::thread communication_;
};

}  // namespace est::distribute
