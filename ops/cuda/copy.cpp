// The CUDA backend's copy kernel (OpId::kCopy on the GPU side of any copy): host -> device and
// device -> host through pinned staging buffers on the device's copy stream, device -> device on
// the compute stream (between two GPUs, a peer copy on the destination's).
//
// Order across streams is kept with events: the copy stream first waits for the compute stream
// (the kernels that wrote the source, or last used the destination's block, come first), and
// after a host -> device copy the compute stream waits for the copy, so kernels that read the
// new tensor run after it; the host returns at once. A device -> host copy waits for its copy
// on the host, since the caller reads the result next. The host writes a staging buffer before
// its copy is queued, so the buffer is only reused once that copy's event has completed.
#include <cstring>

#include "ops/cuda/allocator.h"
#include "ops/cuda/check.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/id_check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

cudaStream_t stream_of(Stream stream) { return static_cast<cudaStream_t>(stream); }

void host_to_device(const Tensor& source, Tensor& target) {
  const int device = target.device().index;
  check_no_host_access(device, "a copy from the host to the GPU", source);
  const size_t bytes = source.nbytes();
  void* staging = pinned_buffer(device, bytes);
  std::memcpy(staging, source.raw_data(), bytes);
  DeviceGuard guard(device);
  stream_wait(device, copy_stream(device), compute_stream(device));
  EST_CUDA_CHECK(cudaMemcpyAsync(target.raw_data(), staging, bytes, cudaMemcpyHostToDevice,
                                 stream_of(copy_stream(device))));
  Event done = record_event(device, copy_stream(device));
  EST_CUDA_CHECK(
      cudaStreamWaitEvent(stream_of(compute_stream(device)), static_cast<cudaEvent_t>(done), 0));
  release_pinned_buffer(device, staging, done);  // reusable once the copy has read it
}

void device_to_host(const Tensor& source, Tensor& target) {
  const int device = source.device().index;
  check_no_host_access(device, "a copy from the GPU to the host (Tensor::item, Tensor::to)",
                       source);
  const size_t bytes = source.nbytes();
  void* staging = pinned_buffer(device, bytes);
  DeviceGuard guard(device);
  stream_wait(device, copy_stream(device), compute_stream(device));
  EST_CUDA_CHECK(cudaMemcpyAsync(staging, source.raw_data(), bytes, cudaMemcpyDeviceToHost,
                                 stream_of(copy_stream(device))));
  Event done = record_event(device, copy_stream(device));
  wait_event(done);
  release_event(device, done);
  std::memcpy(target.raw_data(), staging, bytes);
  release_pinned_buffer(device, staging, nullptr);
  raise_bad_ids(device);  // the compute work before the copy is done: its id checks are in
}

void between_devices(const Tensor& source, Tensor& target) {
  const int from = source.device().index, to = target.device().index;
  Event source_ready = record_event(from, compute_stream(from));
  DeviceGuard guard(to);
  EST_CUDA_CHECK(cudaStreamWaitEvent(stream_of(compute_stream(to)),
                                     static_cast<cudaEvent_t>(source_ready), 0));
  release_event(from, source_ready);
  EST_CUDA_CHECK(cudaMemcpyPeerAsync(target.raw_data(), to, source.raw_data(), from,
                                     source.nbytes(), stream_of(compute_stream(to))));
  // The source's block may be reused by later work on its own device: after this copy.
  Event done = record_event(to, compute_stream(to));
  {
    DeviceGuard source_guard(from);
    EST_CUDA_CHECK(
        cudaStreamWaitEvent(stream_of(compute_stream(from)), static_cast<cudaEvent_t>(done), 0));
  }
  release_event(to, done);
}

}  // namespace

void copy(const Tensor& source, Tensor& target) {
  if (source.nbytes() == 0) return;
  const Device from = source.device(), to = target.device();
  if (from.is_cpu())
    host_to_device(source, target);
  else if (to.is_cpu())
    device_to_host(source, target);
  else if (from.index == to.index)
    copy_on_device(source, target);
  else
    between_devices(source, target);
}

}  // namespace est::ops::cuda
