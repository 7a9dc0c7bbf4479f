// Host -> device copies on the copy stream with the compute stream's wait left to the consumer
// (see async_copy.h); copy.cpp's host_to_device is the synchronous-looking form of the same.
// A copy queued while another thread captures the device into a CUDA graph (prefetch_to_device's
// worker during a CapturedStep's capture) must not wait on the compute stream: an event recorded
// there is a node of the capture, and waiting on it would join the copy stream to the capture
// (the capture then fails, or worse, records the copy). It need not: the capture began with a
// device synchronisation, so no eager compute work is pending, and the target's block comes
// from the shared cache, never the graph's pool (BlockCache serves pools to the capturing
// thread only). The check and the wait happen under lock_capture_state, so a capture cannot
// begin between them.
#include "ops/cuda/async_copy.h"

#include <cstring>

#include "ops/cuda/allocator.h"
#include "ops/cuda/check.h"
#include "ops/cuda/graph.h"

namespace est::ops::cuda {

void copy_to_device_async(const Tensor& source, Tensor& target) {
  const size_t bytes = source.nbytes();
  if (bytes == 0) return;
  const int device = target.device().index;
  void* staging = pinned_buffer(device, bytes);
  std::memcpy(staging, source.raw_data(), bytes);
  DeviceGuard guard(device);
  {
    std::unique_lock lock = lock_capture_state(device);
    if (!capturing(device)) stream_wait(device, copy_stream(device), compute_stream(device));
  }
  EST_CUDA_CHECK(cudaMemcpyAsync(target.raw_data(), staging, bytes, cudaMemcpyHostToDevice,
                                 static_cast<cudaStream_t>(copy_stream(device))));
  record_stream(device, target.raw_data(), copy_stream(device));
  release_pinned_buffer(device, staging, record_event(device, copy_stream(device)));
}

Event copy_stream_event(int device) {
  DeviceGuard guard(device);
  return record_event(device, copy_stream(device));
}

void compute_stream_wait(int device, Event event) {
  DeviceGuard guard(device);
  EST_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(compute_stream(device)),
                                     static_cast<cudaEvent_t>(event), 0));
  release_event(device, event);
}

}  // namespace est::ops::cuda
