// Caching allocators: a training step frees and re-allocates the same sizes every step, so
// freed blocks are kept in per-size free lists and handed out again. After the first steps a
// steady-state step makes no system allocation (checked through AllocatorStats in the tests).
//
// The cache is bounded: when keeping a freed block would take the cached bytes over the limit,
// the blocks of the size classes used longest ago go back to the system first. The automatic
// limit is twice the peak bytes in use (at least 64 MiB), which holds a training step's working
// set (so the steady state stays allocation-free) while shapes that change step after step
// (ragged or padded batches, a short final batch) cannot grow the cache without end. A system
// allocation first frees the size classes not freed or reused in the last 4096 frees and
// reuses: a block of an earlier phase (a decoded file, another batch size) does not stay
// resident beside the new one.
// trim_memory() returns every cached block to the system and resets the peak, after an
// evaluation at a larger batch for instance. memory_stats() reports the counters (TensorFlow's
// tf.config.experimental.get_memory_info gives `current` and `peak`: bytes_in_use and
// peak_bytes_in_use here).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/device.h"

namespace est::ops {

struct AllocatorStats {
  int64_t system_allocations = 0;  // blocks obtained from the system so far
  int64_t system_frees = 0;        // blocks given back to the system (evicted or trimmed)
  int64_t allocations = 0;         // requests served, cached or not
  int64_t bytes_in_use = 0;        // in blocks handed out (rounded to size classes)
  int64_t peak_bytes_in_use = 0;   // since the start or the last trim
  int64_t bytes_cached = 0;        // free blocks kept for reuse
  int64_t cache_limit = 0;         // bytes_cached never exceeds it
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void release_cached() = 0;  // returns cached blocks to the system
  // The most bytes the cache keeps; a negative value restores the automatic limit.
  virtual void set_cache_limit(int64_t /*bytes*/) {}
  virtual void reset_peak() {}  // peak_bytes_in_use = bytes_in_use
};

// The size class a request of `bytes` is rounded up to (every caching allocator uses them):
// multiples of 512 bytes below 64 KiB, then 1/8 power-of-two steps, so at most 12.5% is wasted
// on a large tensor.
size_t allocation_size(size_t bytes);

// The allocator for a device. CPU blocks are 64-byte aligned (oneDNN and AVX-512 like that).
Allocator& allocator_for(Device device);

// Replaces the allocator of a non-CPU device type (a GPU's is the CUDA backend's when built);
// returns the factory it replaces (null: the built-in one). For tests that need tensors on a
// device this machine lacks.
using AllocatorFactory = Allocator* (*)(int index);
AllocatorFactory register_allocator(DeviceType type, AllocatorFactory factory);

// The counters of a device's allocator.
AllocatorStats memory_stats(Device device = Device::cpu());

// Gives every cached block of a device back to the system (and the C library's free memory to
// the operating system) and resets the peak. Returns the bytes that were cached.
int64_t trim_memory(Device device = Device::cpu());

}  // namespace est::ops
