// CollectiveAllReduce over NCCL across workers: the communicator (unique id from the chief,
// non-blocking init watched with the job's health), all-reduce and broadcast of GPU tensors,
// host tensors over the ring. See the header.
#include "distribute/collectives/nccl_collective_all_reduce.h"

#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <optional>
#include <thread>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/collectives/nccl_unique_id.h"
#include "distribute/net/coordination_client.h"
#include "ops/cuda/check.h"
#include "ops/cuda/runtime.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  auto now = Clock::now();
  if (timeout >=
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now))
    return Clock::time_point::max();
  return now + timeout;
}

ncclDataType_t nccl_type(ops::DType dtype) {
  return dtype == ops::DType::kF32 ? ncclFloat32 : ncclFloat64;
}

// This task's ranks of the job's communicator, one per local GPU.
class NcclRanks {
 public:
  NcclRanks(std::vector<int> devices, int worker, int workers, const std::string& id,
            HealthCheck health, Clock::time_point deadline)
      : devices_(std::move(devices)), health_(std::move(health)) {
    ncclUniqueId unique_id;
    std::memcpy(unique_id.internal, id.data(), sizeof unique_id.internal);
    const int local = static_cast<int>(devices_.size());
    comms_.assign(devices_.size(), nullptr);
    const std::string what = fmt::format("the NCCL rendezvous (ranks {}..{} of {})", worker * local,
                                         worker * local + local - 1, workers * local);
    try {
      if (local > 1) start_group(what);
      for (int i = 0; i < local; ++i) {
        ops::cuda::DeviceGuard guard(devices_[static_cast<size_t>(i)]);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        issue(ncclCommInitRankConfig(&comms_[static_cast<size_t>(i)], workers * local, unique_id,
                                     worker * local + i, &config),
              "ncclCommInitRankConfig", what);
      }
      if (local > 1) end_group(what);
    } catch (...) {
      abort();
      throw;
    }
    watch([] { return true; }, what, deadline, "MultiWorkerOptions.session_creation_timeout");
  }
  // Aborting is local (it never waits for the peers): the job is over when this runs.
  ~NcclRanks() { abort(); }
  NcclRanks(const NcclRanks&) = delete;
  NcclRanks& operator=(const NcclRanks&) = delete;

  size_t local_index(const ops::Tensor& t) const {
    for (size_t k = 0; k < devices_.size(); ++k)
      if (t.device().is_cuda() && t.device().index == devices_[k]) return k;
    throw InvalidArgumentError(
        fmt::format("CollectiveAllReduce (NCCL): a tensor on {} is on none of this worker's GPUs",
                    t.device().str()));
  }

  // Sums `tensors` (on this task's GPUs) over every worker, in place.
  void all_reduce(const std::vector<ops::Tensor*>& tensors, const std::string& what,
                  Clock::time_point deadline) {
    check_usable();
    // The local ranks without the tensor take part with zeros.
    std::vector<std::vector<ops::Tensor>> zeros(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      size_t holder = local_index(*tensors[i]);
      for (size_t k = 0; k < devices_.size(); ++k)
        zeros[i].push_back(k == holder
                               ? ops::Tensor()
                               : ops::Tensor::zeros(tensors[i]->shape(), tensors[i]->dtype(),
                                                    ops::Device::cuda(devices_[k])));
    }
    run_group(what, deadline, [&] {
      for (size_t i = 0; i < tensors.size(); ++i)
        for (size_t k = 0; k < devices_.size() && tensors[i]->numel() > 0; ++k) {
          ops::Tensor& t = zeros[i][k].defined() ? zeros[i][k] : *tensors[i];
          ops::cuda::DeviceGuard guard(devices_[k]);
          issue(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                              nccl_type(t.dtype()), ncclSum, comms_[k], stream(k)),
                "ncclAllReduce", what);
        }
    });
  }

  // Copies the chief's `tensors` (byte for byte) into every worker's.
  void broadcast(const std::vector<ops::Tensor*>& tensors, const std::string& what,
                 Clock::time_point deadline) {
    check_usable();
    std::vector<std::vector<ops::Tensor>> scratch(tensors.size());
    std::vector<int> roots;  // worker 0's rank on the tensor's local GPU
    for (size_t i = 0; i < tensors.size(); ++i) {
      size_t holder = local_index(*tensors[i]);
      roots.push_back(static_cast<int>(holder));
      for (size_t k = 0; k < devices_.size(); ++k)
        scratch[i].push_back(k == holder
                                 ? ops::Tensor()
                                 : ops::Tensor::empty(tensors[i]->shape(), tensors[i]->dtype(),
                                                      ops::Device::cuda(devices_[k])));
    }
    run_group(what, deadline, [&] {
      for (size_t i = 0; i < tensors.size(); ++i)
        for (size_t k = 0; k < devices_.size() && tensors[i]->numel() > 0; ++k) {
          ops::Tensor& t = scratch[i][k].defined() ? scratch[i][k] : *tensors[i];
          ops::cuda::DeviceGuard guard(devices_[k]);
          issue(ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, roots[i],
                              comms_[k], stream(k)),
                "ncclBroadcast", what);
        }
    });
  }

 private:
  cudaStream_t stream(size_t k) const {
    return static_cast<cudaStream_t>(ops::cuda::compute_stream(devices_[k]));
  }

  // Issues one NCCL group, then watches it until it has run on every stream.
  template <class Issue>
  void run_group(const std::string& what, Clock::time_point deadline, Issue&& calls) {
    try {
      start_group(what);
      calls();
      end_group(what);
    } catch (...) {
      abort();
      throw;
    }
    const char* limit = "CommunicationOptions.timeout_seconds";
    watch([] { return true; }, what, deadline, limit);  // enqueued on every stream
    std::vector<ops::cuda::Event> events;
    for (size_t k = 0; k < devices_.size(); ++k)
      events.push_back(
          ops::cuda::record_event(devices_[k], ops::cuda::compute_stream(devices_[k])));
    auto release = [&] {
      for (size_t k = 0; k < events.size(); ++k) ops::cuda::release_event(devices_[k], events[k]);
    };
    try {
      watch(
          [&] {
            for (ops::cuda::Event event : events)
              if (!ops::cuda::event_done(event)) return false;
            return true;
          },
          what, deadline, limit);
    } catch (...) {
      release();
      throw;
    }
    release();
  }

  void start_group(const std::string& what) {
    issue(ncclGroupStart(), "ncclGroupStart", what);
    in_group_ = true;
  }
  void end_group(const std::string& what) {
    in_group_ = false;
    issue(ncclGroupEnd(), "ncclGroupEnd", what);
  }

  // An NCCL call's result: ncclInProgress is fine (non-blocking communicators).
  void issue(ncclResult_t result, const char* call, const std::string& what) {
    if (result == ncclSuccess || result == ncclInProgress) return;
    fail(result, nullptr, call, what);
  }

  // Polls the communicators, the job's health and the deadline until every communicator is
  // ready and `done()`; on any failure aborts the communicators and throws.
  template <class Done>
  void watch(Done&& done, const std::string& what, Clock::time_point deadline, const char* limit) {
    for (int spin = 0;; ++spin) {
      bool ready = true;
      for (ncclComm_t comm : comms_) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t result = ncclCommGetAsyncError(comm, &state);
        if (result != ncclSuccess) fail(result, comm, "ncclCommGetAsyncError", what);
        if (state == ncclInProgress)
          ready = false;
        else if (state != ncclSuccess)
          fail(state, comm, "the communicator", what);
      }
      if (ready && done()) return;
      if (health_)
        if (std::optional<JobStatus> error = health_(false)) fail_job(*error, what);
      if (Clock::now() > deadline) {
        abort();
        broken_ = fmt::format("{} did not complete within {}", what, limit);
        throw DeadlineExceededError(fmt::format(
            "{}: a task of the job is not taking part (stopped, or running other collectives); "
            "raise {} if it is only slow",
            broken_, limit));
      }
      if (spin < 2000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  [[noreturn]] void fail_job(const JobStatus& error, const std::string& what) {
    abort();
    broken_ = error.message;
    throw_error(error.code, fmt::format("{} (this task was in {})", error.message, what));
  }

  [[noreturn]] void fail(ncclResult_t result, ncclComm_t comm, const char* call,
                         const std::string& what) {
    const char* last = ncclGetLastError(comm);  // comm may be null
    std::string detail = last ? last : "";
    abort();
    // A peer's failure usually shows as a remote or system error; its report names it.
    if (health_)
      if (std::optional<JobStatus> error = health_(true)) fail_job(*error, what);
    broken_ = fmt::format("{} failed during {}: {}{}", call, what, ncclGetErrorString(result),
                          detail.empty() ? "" : " (" + detail + ")");
    if (result == ncclRemoteError || result == ncclSystemError)
      throw UnavailableError(broken_ +
                             "; a peer task or its network failed (set NCCL_DEBUG=WARN for "
                             "NCCL's own account)");
    throw InternalError(broken_ + " (set NCCL_DEBUG=WARN for NCCL's own account)");
  }

  void check_usable() const {
    if (!broken_.empty())
      throw UnavailableError(fmt::format(
          "the job's NCCL communicator was aborted after an earlier failure ({}); restart the job",
          broken_));
  }

  // Closes an open group first: its communicators must not be aborted inside it.
  void abort() noexcept {
    if (in_group_) {
      in_group_ = false;
      ncclGroupEnd();
    }
    for (ncclComm_t& comm : comms_)
      if (comm) {
        ncclCommAbort(comm);
        comm = nullptr;
      }
  }

  std::vector<int> devices_;
  HealthCheck health_;
  std::vector<ncclComm_t> comms_;
  std::string broken_;  // why the communicator was aborted
  bool in_group_ = false;
};

class NcclCollectiveAllReduce : public CollectiveAllReduce {
 public:
  NcclCollectiveAllReduce(std::shared_ptr<ClusterRuntime> runtime, CommunicationOptions options,
                          std::shared_ptr<CrossDeviceOps> local, std::unique_ptr<NcclRanks> ranks)
      : CollectiveAllReduce(std::move(runtime), options, std::move(local)),
        ranks_(std::move(ranks)) {}

  bool reduces_device_tensors() const override { return true; }

  void reduce_across_workers(std::vector<ops::Tensor>& sums, const std::string& what) override {
    if (num_workers() == 1) return;
    std::vector<ops::Tensor*> gpu;
    std::vector<size_t> host_index;
    std::vector<ops::Tensor> host;
    for (size_t i = 0; i < sums.size(); ++i) {
      ops::Tensor& t = sums[i];
      if (!t.defined()) continue;
      if (t.device().is_cuda()) {
        if (t.dtype() != ops::DType::kF32 && t.dtype() != ops::DType::kF64)
          throw InvalidArgumentError(fmt::format(
              "all-reduce: a {} tensor cannot be summed across workers; only float32 and float64",
              dtype_name(t.dtype())));
        gpu.push_back(&t);
      } else {
        host_index.push_back(i);
        host.push_back(t);
      }
    }
    if (!gpu.empty()) ranks_->all_reduce(gpu, what, deadline());
    if (!host.empty()) {
      CollectiveAllReduce::reduce_across_workers(host, what);
      for (size_t j = 0; j < host.size(); ++j) sums[host_index[j]] = host[j];
    }
  }

  void broadcast_from_chief(std::vector<ops::Tensor>& values, const std::string& what) override {
    if (num_workers() == 1) return;
    std::vector<ops::Tensor*> gpu;
    std::vector<size_t> host_index;
    std::vector<ops::Tensor> host;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].defined()) continue;
      if (values[i].device().is_cuda()) {
        gpu.push_back(&values[i]);
      } else {
        host_index.push_back(i);
        host.push_back(values[i]);
      }
    }
    if (!gpu.empty()) ranks_->broadcast(gpu, what, deadline());
    if (!host.empty()) {
      CollectiveAllReduce::broadcast_from_chief(host, what);
      for (size_t j = 0; j < host.size(); ++j) values[host_index[j]] = host[j];
    }
  }

  // At once, on the caller's thread: NCCL collectives and the ring then never run on two
  // threads at a time.
  std::unique_ptr<PendingReduction> start_reduce(std::vector<ops::Tensor> inputs,
                                                 std::vector<double> factors,
                                                 std::string what) override {
    return CrossDeviceOps::start_reduce(std::move(inputs), std::move(factors), std::move(what));
  }

 private:
  Clock::time_point deadline() const {
    if (!options().timeout_seconds) return Clock::time_point::max();
    return deadline_after(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(*options().timeout_seconds)));
  }

  std::unique_ptr<NcclRanks> ranks_;
};

}  // namespace

std::vector<std::string> gpu_bus_ids(const std::vector<ops::Device>& devices) {
  std::vector<std::string> ids;
  for (const ops::Device& device : devices) {
    char id[64] = {};
    EST_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id - 1, device.index));
    ids.emplace_back(id);
  }
  return ids;
}

std::shared_ptr<CollectiveAllReduce> make_nccl_collective_all_reduce(
    std::shared_ptr<ClusterRuntime> runtime, CommunicationOptions options,
    const std::vector<ops::Device>& devices, std::chrono::milliseconds rendezvous_timeout) {
  std::vector<int> gpus;
  for (const ops::Device& device : devices) {
    if (!device.is_cuda())
      throw FailedPreconditionError(fmt::format(
          "MultiWorkerMirroredStrategy: communication NCCL needs GPU devices only, but {} is "
          "not a GPU",
          device.str()));
    for (int seen : gpus)
      if (seen == device.index)
        throw InvalidArgumentError(fmt::format(
            "MultiWorkerMirroredStrategy: communication NCCL needs distinct GPUs, but {} is "
            "listed twice (NCCL allows one rank of a communicator per GPU)",
            device.str()));
    ops::cuda::require_device(device.index);
    gpus.push_back(device.index);
  }
  std::shared_ptr<CrossDeviceOps> local;
  if (gpus.size() > 1) local = std::make_shared<NcclAllReduce>();
  if (!runtime) return std::make_shared<CollectiveAllReduce>(nullptr, options, local);
  ClusterRuntime& job = *runtime;
  KeyValueStore store{.set = [&](const std::string& key,
                                 const std::string& value) { job.coordination().set(key, value); },
                      .get =
                          [&](const std::string& key, std::chrono::milliseconds timeout) {
                            return job.coordination().get(key, timeout);
                          }};
  auto started = Clock::now();
  auto deadline = deadline_after(rendezvous_timeout);
  std::string id = exchange_nccl_unique_id(
      store, job.is_leader(), job.job_incarnation(), 0,
      [] {
        ncclUniqueId unique_id;
        ncclResult_t result = ncclGetUniqueId(&unique_id);
        if (result != ncclSuccess)
          throw UnavailableError(
              fmt::format("ncclGetUniqueId failed on the chief: {} ({}); set NCCL_DEBUG=WARN (and "
                          "NCCL_SOCKET_IFNAME if no network interface suits)",
                          ncclGetErrorString(result), ncclGetLastError(nullptr)));
        return std::string(unique_id.internal, sizeof unique_id.internal);
      },
      rendezvous_timeout);
  auto ranks =
      std::make_unique<NcclRanks>(gpus, job.rank(), job.world(), id, job.health(), deadline);
  int local_count = static_cast<int>(gpus.size());
  log::info("NCCL communicator of {} ranks ready ({} holds ranks {}..{}) after {:.2f} s.",
            job.world() * local_count, job.task_name(), job.rank() * local_count,
            job.rank() * local_count + local_count - 1,
            std::chrono::duration<double>(Clock::now() - started).count());
  return std::make_shared<NcclCollectiveAllReduce>(std::move(runtime), options, std::move(local),
                                                   std::move(ranks));
}

}  // namespace est::distribute
