// The CUDA block sources (cudaMalloc / cudaHostAlloc, with the device's events) and the
// per-device caches built on them.
#include "ops/cuda/allocator.h"

#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ops/cuda/block_cache.h"
#include "ops/cuda/check.h"

namespace est::ops::cuda {
namespace {

// Device or pinned host memory of one GPU, with that GPU's events.
class CudaSource final : public BlockSource {
 public:
  CudaSource(int device, bool pinned_host) : device_(device), pinned_host_(pinned_host) {}

  void* allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t error =
        pinned_host_ ? cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault) : cudaMalloc(&ptr, bytes);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it, the cache frees memory and retries
      return nullptr;
    }
    EST_CUDA_CHECK(error);
    return ptr;
  }
  void free(void* ptr) override {
    DeviceGuard guard(device_);
    EST_CUDA_CHECK(pinned_host_ ? cudaFreeHost(ptr) : cudaFree(ptr));
  }
  Event record_event(Stream stream) override { return cuda::record_event(device_, stream); }
  bool event_done(Event event) override { return cuda::event_done(event); }
  void release_event(Event event) override { cuda::release_event(device_, event); }
  void synchronize() override {  // not cuda::synchronize: no id check's error inside the cache
    DeviceGuard guard(device_);
    EST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(compute_stream(device_))));
    EST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(copy_stream(device_))));
  }

 private:
  int device_;
  bool pinned_host_;
};

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device)
      : device_(device),
        source_(device, /*pinned_host=*/false),
        cache_(source_, fmt::format("memory of /gpu:{}", device)) {}

  void* allocate(size_t bytes) override { return cache_.allocate(bytes, compute_stream(device_)); }
  void deallocate(void* ptr, size_t /*bytes*/) override { cache_.deallocate(ptr); }
  AllocatorStats stats() const override { return cache_.stats(); }
  void release_cached() override { cache_.release_cached(); }
  void set_cache_limit(int64_t bytes) override { cache_.set_cache_limit(bytes); }
  void reset_peak() override { cache_.reset_peak(); }
  BlockCache& cache() { return cache_; }

 private:
  int device_;
  CudaSource source_;
  BlockCache cache_;
};

struct DeviceMemory {
  std::unique_ptr<DeviceAllocator> allocator;
  std::unique_ptr<CudaSource> pinned_source;
  std::unique_ptr<BlockCache> pinned;
};

DeviceMemory& memory(int device) {
  require_device(device);
  static std::mutex mutex;
  // Leaked: tensors in static storage may be freed after main returns.
  static auto* all = new std::vector<DeviceMemory>(static_cast<size_t>(device_count()));
  std::lock_guard lock(mutex);
  DeviceMemory& m = (*all)[static_cast<size_t>(device)];
  if (!m.allocator) {
    m.allocator = std::make_unique<DeviceAllocator>(device);
    m.pinned_source = std::make_unique<CudaSource>(device, /*pinned_host=*/true);
    m.pinned = std::make_unique<BlockCache>(*m.pinned_source,
                                            fmt::format("pinned host memory for /gpu:{}", device));
  }
  return m;
}

}  // namespace

Allocator& device_allocator(int device) { return *memory(device).allocator; }

void record_stream(int device, void* ptr, Stream stream) {
  memory(device).allocator->cache().record_stream(ptr, stream);
}

void* pinned_buffer(int device, size_t bytes) {
  return memory(device).pinned->allocate(bytes, copy_stream(device));
}

void release_pinned_buffer(int device, void* buffer, Event copy_done) {
  memory(device).pinned->deallocate(buffer, copy_done);
}

uint64_t create_private_pool(int device) { return memory(device).allocator->cache().create_pool(); }

void begin_private_pool(int device, uint64_t pool) {
  memory(device).allocator->cache().begin_pool(pool, compute_stream(device));
}

void end_private_pool(int device) {
  memory(device).allocator->cache().end_pool(compute_stream(device));
}

void release_private_pool(int device, uint64_t pool) {
  memory(device).allocator->cache().release_pool(pool);
}

int64_t private_pool_bytes(int device, uint64_t pool) {
  return memory(device).allocator->cache().pool_bytes(pool);
}

}  // namespace est::ops::cuda
