// Caching allocators: a training step frees and re-allocates the same sizes every step, so
// freed blocks are kept in per-size free lists and handed out again. After the first steps a
// steady-state step makes no system allocation (checked through AllocatorStats in the tests).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/device.h"

namespace est::ops {

struct AllocatorStats {
  int64_t system_allocations = 0;  // blocks obtained from the system so far
  int64_t allocations = 0;         // requests served, cached or not
  int64_t bytes_in_use = 0;
  int64_t bytes_cached = 0;        // free blocks kept for reuse
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void release_cached() = 0;  // returns cached blocks to the system
};

// The allocator for a device. CPU blocks are 64-byte aligned (oneDNN and AVX-512 like that).
Allocator& allocator_for(Device device);

// Registers the allocator of a non-CPU device type (the CUDA backend calls this).
void register_allocator(DeviceType type, Allocator* (*factory)(int index));

}  // namespace est::ops
