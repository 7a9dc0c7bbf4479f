// Device count and properties, per-device streams and event pools, the device guard, and the
// error helpers of check.h.
#include "ops/cuda/runtime.h"

#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ops/cuda/check.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/id_check.h"

namespace est::ops::cuda {
namespace {

struct DeviceCount {
  int count = 0;
  std::string reason;
};

const DeviceCount& counted() {
  static const DeviceCount result = [] {
    DeviceCount c;
    const cudaError_t error = cudaGetDeviceCount(&c.count);
    if (error != cudaSuccess) {
      c.count = 0;
      c.reason = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(error),
                             cudaGetErrorName(error));
      cudaGetLastError();  // clear the sticky error state of the failed call
    } else if (c.count == 0) {
      c.reason = "cudaGetDeviceCount found no GPU";
    }
    return c;
  }();
  return result;
}

// A device's streams and a pool of events, created on first use.
struct DeviceState {
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  std::mutex events_mutex;
  std::vector<cudaEvent_t> free_events;
};

DeviceState& state(int device) {
  require_device(device);
  static std::mutex mutex;
  static auto* states = new std::vector<std::unique_ptr<DeviceState>>(
      static_cast<size_t>(device_count()));  // leaked: used while static destructors run
  std::lock_guard lock(mutex);
  auto& slot = (*states)[static_cast<size_t>(device)];
  if (!slot) {
    auto created = std::make_unique<DeviceState>();
    DeviceGuard guard(device);
    EST_CUDA_CHECK(cudaStreamCreateWithFlags(&created->compute, cudaStreamNonBlocking));
    EST_CUDA_CHECK(cudaStreamCreateWithFlags(&created->copy, cudaStreamNonBlocking));
    slot = std::move(created);
  }
  return *slot;
}

}  // namespace

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  const std::string message =
      fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(error),
                  cudaGetErrorString(error), call, file, line);
  if (error == cudaErrorMemoryAllocation)
    throw ResourceExhaustedError(message +
                                 "; the GPU is out of memory: reduce the batch size, or "
                                 "give cached blocks back with ops::trim_memory(device)");
  throw InternalError(message);
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  throw InternalError(fmt::format("cuBLAS error {} in {} at {}:{}", status, call, file, line));
}

int device_count() { return counted().count; }

std::string no_device_reason() { return counted().reason; }

void require_device(int device) {
  if (device >= 0 && device < device_count()) return;
  if (device_count() == 0)
    throw FailedPreconditionError(
        fmt::format("/gpu:{} does not exist: this process sees no GPU ({}); use CPU devices",
                    device, no_device_reason()));
  throw FailedPreconditionError(
      fmt::format("/gpu:{} does not exist: this process sees {} GPU(s), /gpu:0 to /gpu:{}", device,
                  device_count(), device_count() - 1));
}

DeviceProperties properties(int device) {
  require_device(device);
  cudaDeviceProp prop{};
  EST_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return {.name = prop.name,
          .total_memory = static_cast<int64_t>(prop.totalGlobalMem),
          .compute_major = prop.major,
          .compute_minor = prop.minor,
          .multiprocessors = prop.multiProcessorCount};
}

Stream compute_stream(int device) { return state(device).compute; }
Stream copy_stream(int device) { return state(device).copy; }

Event record_event(int device, Stream stream) {
  DeviceState& s = state(device);
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(s.events_mutex);
    if (!s.free_events.empty()) {
      event = s.free_events.back();
      s.free_events.pop_back();
    }
  }
  DeviceGuard guard(device);
  if (event == nullptr) EST_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  EST_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
  return event;
}

bool event_done(Event event) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady) return false;
  EST_CUDA_CHECK(status);
  return true;
}

void wait_event(Event event) {
  EST_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void release_event(int device, Event event) {
  DeviceState& s = state(device);
  std::lock_guard lock(s.events_mutex);
  s.free_events.push_back(static_cast<cudaEvent_t>(event));
}

void stream_wait(int device, Stream later, Stream earlier) {
  Event event = record_event(device, earlier);
  {
    DeviceGuard guard(device);
    EST_CUDA_CHECK(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(later), static_cast<cudaEvent_t>(event), 0));
  }
  release_event(device, event);  // a recorded event may be re-recorded once waited on
}

void synchronize(int device) {
  if (capturing(device))
    throw FailedPreconditionError(fmt::format(
        "synchronize(/gpu:{}) inside a CUDA graph capture of that device: a captured step must "
        "not wait for the device on the host; synchronise after replay() instead",
        device));
  DeviceState& s = state(device);
  EST_CUDA_CHECK(cudaStreamSynchronize(s.compute));
  EST_CUDA_CHECK(cudaStreamSynchronize(s.copy));
  raise_bad_ids(device);  // the asynchronous id checks of the work just waited for
}

DeviceGuard::DeviceGuard(int device) : previous_(-1) {
  EST_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) EST_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
}

}  // namespace est::ops::cuda
