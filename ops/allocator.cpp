// The CPU caching allocator: blocks rounded up to size classes, free lists per class.
#include "ops/allocator.h"

#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ops/error.h"

namespace est::ops {
namespace {

constexpr size_t kAlignment = 64;

// Size classes: multiples of 512 bytes below 64 KiB, then 1/8 power-of-two steps, so at most
// 12.5% is wasted on a large tensor.
size_t round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < 65536) return (bytes + 511) & ~size_t{511};
  size_t top = size_t{1} << (63 - __builtin_clzll(bytes));
  size_t step = top / 8;
  return (bytes + step - 1) / step * step;
}

class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override { release_cached(); }

  void* allocate(size_t bytes) override {
    size_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    stats_.bytes_in_use += static_cast<int64_t>(size);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= static_cast<int64_t>(size);
      return ptr;
    }
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      release_cached_locked();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (ptr == nullptr)
      throw ResourceExhaustedError("out of CPU memory allocating " + std::to_string(size) +
                                   " bytes for a tensor; reduce the batch size or model size");
    ++stats_.system_allocations;
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    size_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    stats_.bytes_cached += static_cast<int64_t>(size);
    free_[size].push_back(ptr);
  }

  AllocatorStats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void release_cached() override {
    std::lock_guard lock(mutex_);
    release_cached_locked();
  }

 private:
  void release_cached_locked() {
    for (auto& [size, blocks] : free_)
      for (void* ptr : blocks) std::free(ptr);
    free_.clear();
    stats_.bytes_cached = 0;
  }

  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

std::array<Allocator* (*)(int), 2>& factories() {
  static std::array<Allocator* (*)(int), 2> table{};
  return table;
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    // Intentionally leaked: tensors in static storage may be freed after main returns.
    static Allocator* cpu = new CpuCachingAllocator();
    return *cpu;
  }
  auto factory = factories()[static_cast<size_t>(device.type)];
  if (factory == nullptr)
    throw FailedPreconditionError("no allocator for device " + device.str() +
                                  ": this build has no CUDA backend, or no GPU is present");
  return *factory(device.index);
}

void register_allocator(DeviceType type, Allocator* (*factory)(int index)) {
  factories()[static_cast<size_t>(type)] = factory;
}

}  // namespace est::ops
