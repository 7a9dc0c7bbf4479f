// The CUDA backend's memory: a caching allocator per GPU (ops/allocator.h's Allocator, so
// Tensor::empty on /gpu:N and memory_stats(Device::cuda(N)) work as on the CPU) and a cache of
// pinned (page-locked) host buffers that host <-> device copies stage through.
//
// Both are BlockCaches (block_cache.h) over the CUDA runtime: device blocks belong to the
// device's compute stream, where every kernel runs; pinned buffers to its copy stream, each one
// held back after a copy until the copy's event has completed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/allocator.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {

// The allocator of `device`; FailedPreconditionError when this process has no such GPU.
Allocator& device_allocator(int device);

// Marks a block of `device`'s allocator as also used by work on `stream` (see
// BlockCache::record_stream).
void record_stream(int device, void* ptr, Stream stream);

// A pinned host buffer of at least `bytes` for copies of `device`, and its return: reusable
// once `copy_done` (an event recorded after the copy that reads or writes it, which the cache
// then owns; null when the caller already waited for the copy) has completed.
void* pinned_buffer(int device, size_t bytes);
void release_pinned_buffer(int device, void* buffer, Event copy_done);

// Private pools of `device`'s allocator for CUDA graph capture (graph.h; BlockCache's pools):
// between begin_private_pool and end_private_pool the compute stream's allocations come from
// `pool`.
uint64_t create_private_pool(int device);
void begin_private_pool(int device, uint64_t pool);
void end_private_pool(int device);
void release_private_pool(int device, uint64_t pool);
int64_t private_pool_bytes(int device, uint64_t pool);

}  // namespace est::ops::cuda
