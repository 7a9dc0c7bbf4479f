// NcclAllReduce on the CUDA backend: one communicator set per list of local GPUs
// (ncclCommInitAll, made on first use and kept for the process, as the CUDA streams are), and
// each collective as one NCCL group: ncclAllReduce (sum) of every tensor on every device's
// compute stream, so it is ordered after the kernels that made the gradients and before those
// that read the sums, and the host never waits. The factor (a mean's 1/replicas, a loss scale)
// is applied afterwards on each device, as the CPU algorithms apply it after the sum.
// Follows tensorflow/python/distribute/cross_device_ops.py (NcclAllReduce: all-reduce of each
// tensor over the per-device copies, the mean as sum then divide).
#include <nccl.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "distribute/collectives/cross_device_ops.h"
#include "ops/autograd.h"
#include "ops/cuda/runtime.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::distribute {
namespace {

void nccl_check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw InternalError(std::string("NcclAllReduce: ") + call +
                        " failed: " + ncclGetErrorString(result) +
                        " (set NCCL_DEBUG=WARN for NCCL's own account of it)");
}

// The communicators of `devices` (CUDA device indices), made once.
const std::vector<ncclComm_t>& communicators(const std::vector<int>& devices) {
  static std::mutex mutex;
  static std::map<std::vector<int>, std::vector<ncclComm_t>>* cache =
      new std::map<std::vector<int>, std::vector<ncclComm_t>>();  // never destroyed
  std::lock_guard lock(mutex);
  auto found = cache->find(devices);
  if (found != cache->end()) return found->second;
  for (int device : devices) ops::cuda::require_device(device);
  std::vector<ncclComm_t> comms(devices.size());
  nccl_check(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
             "ncclCommInitAll");
  return cache->emplace(devices, std::move(comms)).first->second;
}

ncclDataType_t nccl_type(ops::DType dtype) {
  return dtype == ops::DType::kF32 ? ncclFloat32 : ncclFloat64;
}

}  // namespace

void NcclAllReduce::reduce_slice(const std::vector<double>& factors,
                                 const std::vector<std::vector<ops::Tensor>*>& inputs,
                                 const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                                 int /*num_slices*/) const {
  if (inputs.empty()) return;
  size_t count = inputs[0]->size();
  for (size_t r = 0; r < inputs.size(); ++r) {
    if (inputs[r]->size() != count)
      throw InvalidArgumentError("all_reduce: replica 0 has " + std::to_string(count) +
                                 " tensors but replica " + std::to_string(r) + " has " +
                                 std::to_string(inputs[r]->size()) +
                                 "; every replica must reduce the same list");
  }
  if (factors.size() != count)
    throw InternalError("NcclAllReduce: " + std::to_string(factors.size()) + " factors for " +
                        std::to_string(count) + " tensors");
  if (slice != 0) return;  // one thread issues the group for every device
  bool any = false;
  for (const ops::Tensor& t : *inputs[0]) any = any || t.defined();
  if (!any) return;
  std::vector<int> devices;
  for (size_t r = 0; r < inputs.size(); ++r) {
    ops::Device device;
    for (const ops::Tensor& t : *inputs[r])
      if (t.defined()) device = t.device();
    if (!device.is_cuda())
      throw InvalidArgumentError("NcclAllReduce: replica " + std::to_string(r) +
                                 "'s tensors are on " + device.str() +
                                 ", not a GPU; NCCL reduces GPU tensors only");
    devices.push_back(device.index);
  }
  std::vector<bool> defined(count);
  for (size_t i = 0; i < count; ++i) {
    const ops::Tensor& first = (*inputs[0])[i];
    for (size_t r = 0; r < inputs.size(); ++r) {
      const ops::Tensor& t = (*inputs[r])[i];
      if (t.defined() != first.defined() ||
          (t.defined() && (t.shape() != first.shape() || t.dtype() != first.dtype())))
        throw InvalidArgumentError("all_reduce: tensor " + std::to_string(i) +
                                   " differs between replica 0 and replica " + std::to_string(r) +
                                   " (defined, shape or dtype); replicas must run the same model");
      if (t.defined() && t.device().index != devices[r])
        throw InvalidArgumentError("NcclAllReduce: replica " + std::to_string(r) +
                                   " has tensors on two devices");
    }
    defined[i] = first.defined();
    if (defined[i] && first.dtype() != ops::DType::kF32 && first.dtype() != ops::DType::kF64)
      throw InvalidArgumentError("all_reduce: tensor " + std::to_string(i) +
                                 " is not float32 or float64; only floating gradients are "
                                 "reduced");
  }
  const std::vector<ncclComm_t>& comms = communicators(devices);
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  try {
    for (size_t i = 0; i < count; ++i) {
      if (!defined[i]) continue;
      for (size_t r = 0; r < inputs.size(); ++r) {
        const ops::Tensor& in = (*inputs[r])[i];
        ops::Tensor& out = (*outputs[r])[i];
        nccl_check(ncclAllReduce(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()),
                                 nccl_type(in.dtype()), ncclSum, comms[r],
                                 static_cast<cudaStream_t>(ops::cuda::compute_stream(devices[r]))),
                   "ncclAllReduce");
      }
    }
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  ops::NoGradGuard no_grad;
  for (size_t i = 0; i < count; ++i) {
    if (!defined[i] || factors[i] == 1.0) continue;
    for (size_t r = 0; r < outputs.size(); ++r) {
      ops::Tensor& out = (*outputs[r])[i];
      out.copy_from(ops::mul(out, factors[i]));
    }
  }
}

}  // namespace est::distribute
