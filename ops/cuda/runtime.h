// The CUDA device runtime: how many GPUs there are and what they are, one compute stream per
// device plus a copy stream, events to order work across streams, and a guard that makes a
// device current on the calling thread.
//
// The header names no CUDA type (streams and events are opaque pointers, which cudaStream_t and
// cudaEvent_t are), so the rest of ops/ includes it without the toolkit's headers. Any error of
// cudaGetDeviceCount, a missing driver included, means "no GPU": device_count() is then 0, and
// asking for a device is a FailedPreconditionError that says so; nothing crashes. Streams are
// created on a device's first use and live as long as the process (they are never destroyed:
// tensors in static storage may be freed after main returns).
#pragma once

#include <cstdint>
#include <string>

namespace est::ops::cuda {

using Stream = void*;  // a cudaStream_t
using Event = void*;   // a cudaEvent_t

// GPUs this process sees (CUDA_VISIBLE_DEVICES applies); 0 when CUDA cannot be initialised.
// Counted once per process.
int device_count();
// Why device_count() is 0 ("cudaGetDeviceCount: no CUDA-capable device is detected"), or "".
std::string no_device_reason();

struct DeviceProperties {
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int64_t total_memory = 0;  // bytes
  int compute_major = 0;     // compute capability, 9.0 for sm_90
  int compute_minor = 0;
  int multiprocessors = 0;
};
// Throws FailedPreconditionError when `device` is not in [0, device_count()).
DeviceProperties properties(int device);

// Throws FailedPreconditionError naming the device and why when it does not exist.
void require_device(int device);

// The streams of `device`: kernels run on the compute stream, host <-> device copies on the
// copy stream, ordered against the compute stream with events (ops/cuda/copy.cpp).
Stream compute_stream(int device);
Stream copy_stream(int device);

// Makes `later` wait for the work queued on `earlier` so far (an event recorded on `earlier`),
// without blocking the host. Both streams belong to `device`.
void stream_wait(int device, Stream later, Stream earlier);
// An event recorded on `stream` now (from the device's pool); release_event gives it back.
Event record_event(int device, Stream stream);
bool event_done(Event event);  // the work before it has finished
void wait_event(Event event);  // blocks the host until it has
void release_event(int device, Event event);

// Blocks until every stream of `device` is idle.
void synchronize(int device);

// Makes `device` current on this thread for the guard's lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace est::ops::cuda
