// The CPU caching allocator: blocks rounded up to size classes, free lists per class, a bound on
// the cached bytes with the least recently used size classes evicted first (see allocator.h).
#include "ops/allocator.h"

#include <malloc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "ops/error.h"
#if EST_HAVE_CUDA
#include "ops/cuda/allocator.h"
#endif

namespace est::ops {
namespace {

constexpr size_t kAlignment = 64;
constexpr int64_t kMinimumAutomaticLimit = int64_t{64} << 20;
constexpr int64_t kAutomatic = -1;
constexpr uint64_t kStaleEvents = 4096;  // frees and reuses: tens of training steps

class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override { release_cached(); }

  void* allocate(size_t bytes) override {
    size_t size = allocation_size(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    stats_.bytes_in_use += static_cast<int64_t>(size);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.blocks.empty()) {
      void* ptr = it->second.blocks.back();
      it->second.blocks.pop_back();
      it->second.last_used = ++clock_;
      stats_.bytes_cached -= static_cast<int64_t>(size);
      return ptr;
    }
    evict_stale_locked();
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      release_cached_locked();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (ptr == nullptr) {
      stats_.bytes_in_use -= static_cast<int64_t>(size);
      throw ResourceExhaustedError("out of CPU memory allocating " + std::to_string(size) +
                                   " bytes for a tensor; reduce the batch size or model size");
    }
    ++stats_.system_allocations;
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    size_t size = allocation_size(bytes);
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    const int64_t limit = limit_locked();
    if (static_cast<int64_t>(size) > limit) {  // would not fit even in an empty cache
      std::free(ptr);
      ++stats_.system_frees;
      return;
    }
    SizeClass& size_class = free_[size];
    size_class.blocks.push_back(ptr);
    size_class.last_used = ++clock_;
    stats_.bytes_cached += static_cast<int64_t>(size);
    while (stats_.bytes_cached > limit) evict_oldest_locked();
  }

  AllocatorStats stats() const override {
    std::lock_guard lock(mutex_);
    AllocatorStats result = stats_;
    result.cache_limit = limit_locked();
    return result;
  }

  void release_cached() override {
    std::lock_guard lock(mutex_);
    release_cached_locked();
  }

  void set_cache_limit(int64_t bytes) override {
    std::lock_guard lock(mutex_);
    limit_ = bytes < 0 ? kAutomatic : bytes;
    while (stats_.bytes_cached > limit_locked()) evict_oldest_locked();
  }

  void reset_peak() override {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  struct SizeClass {
    std::vector<void*> blocks;
    uint64_t last_used = 0;  // clock_ when a block of this size was last freed or reused
  };

  int64_t limit_locked() const {
    if (limit_ != kAutomatic) return limit_;
    return std::max(kMinimumAutomaticLimit, 2 * stats_.peak_bytes_in_use);
  }

  // Frees one block of the size class used longest ago (the caller checked that one exists).
  void evict_oldest_locked() {
    auto oldest = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (!it->second.blocks.empty() &&
          (oldest == free_.end() || it->second.last_used < oldest->second.last_used))
        oldest = it;
    std::free(oldest->second.blocks.back());
    oldest->second.blocks.pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(oldest->first);
    ++stats_.system_frees;
    if (oldest->second.blocks.empty()) free_.erase(oldest);
  }

  // Before a system allocation: frees the blocks of the size classes not freed or reused in the
  // last kStaleEvents events (a loaded file once decoded, a shape of an earlier phase), which
  // would otherwise stay resident beside the new block while under the limit. A steady-state
  // step makes no system allocation, so its classes are never judged.
  void evict_stale_locked() {
    if (clock_ < kStaleEvents) return;
    for (auto it = free_.begin(); it != free_.end();) {
      if (it->second.last_used >= clock_ - kStaleEvents) {
        ++it;
        continue;
      }
      for (void* ptr : it->second.blocks) {
        std::free(ptr);
        ++stats_.system_frees;
        stats_.bytes_cached -= static_cast<int64_t>(it->first);
      }
      it = free_.erase(it);
    }
  }

  void release_cached_locked() {
    for (auto& [size, size_class] : free_)
      for (void* ptr : size_class.blocks) {
        std::free(ptr);
        ++stats_.system_frees;
      }
    free_.clear();
    stats_.bytes_cached = 0;
  }

  mutable std::mutex mutex_;
  std::map<size_t, SizeClass> free_;
  AllocatorStats stats_;
  int64_t limit_ = kAutomatic;
  uint64_t clock_ = 0;
};

std::array<AllocatorFactory, 2>& factories() {
  static std::array<AllocatorFactory, 2> table{};
  return table;
}

}  // namespace

size_t allocation_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < 65536) return (bytes + 511) & ~size_t{511};
  size_t top = size_t{1} << (63 - __builtin_clzll(bytes));
  size_t step = top / 8;
  return (bytes + step - 1) / step * step;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    // Intentionally leaked: tensors in static storage may be freed after main returns.
    static Allocator* cpu = new CpuCachingAllocator();
    return *cpu;
  }
  if (AllocatorFactory factory = factories()[static_cast<size_t>(device.type)])
    return *factory(device.index);
#if EST_HAVE_CUDA
  return cuda::device_allocator(device.index);  // FailedPreconditionError without that GPU
#else
  throw FailedPreconditionError("no allocator for device " + device.str() +
                                ": this build has no CUDA backend (configure with -Dcuda=enabled "
                                "where nvcc is installed), so tensors live on CPU devices only");
#endif
}

AllocatorFactory register_allocator(DeviceType type, AllocatorFactory factory) {
  return std::exchange(factories()[static_cast<size_t>(type)], factory);
}

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }

int64_t trim_memory(Device device) {
  Allocator& allocator = allocator_for(device);
  const int64_t cached = allocator.stats().bytes_cached;
  allocator.release_cached();
  allocator.reset_peak();
  if (device.is_cpu()) malloc_trim(0);  // glibc keeps freed heap pages otherwise
  return cached;
}

}  // namespace est::ops
