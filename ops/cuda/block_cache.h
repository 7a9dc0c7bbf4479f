// The caching logic behind the CUDA device allocator and the pinned host buffers, kept free of
// CUDA calls (they come through a BlockSource) so that it is tested on any machine.
//
// A training step allocates the same sizes every step, so freed blocks are kept and handed out
// again: after the first steps no call reaches cudaMalloc (which synchronises the device). Sizes
// are rounded to the CPU allocator's size classes (allocation_size in ops/allocator.h). Reuse is
// stream-ordered, as in PyTorch's CUDA caching allocator: a block freed by its stream's work is
// immediately reusable by later work on that same stream (the stream runs in order, so the new
// kernels start after the old ones finished); a block that was also used on other streams
// (record_stream) is reusable only once events recorded on those streams at free time have
// completed. The cached bytes are bounded like the CPU cache (twice the peak in use, at least
// 64 MiB, or set_cache_limit), least recently used size classes first; when the source is out of
// memory, the cache waits for the device, gives every cached block back and tries again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/allocator.h"

namespace est::ops::cuda {

using Stream = void*;
using Event = void*;

// The memory and the events a BlockCache works with.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  virtual void* allocate(size_t bytes) = 0;  // nullptr when out of memory
  virtual void free(void* ptr) = 0;
  virtual Event record_event(Stream stream) = 0;
  virtual bool event_done(Event event) = 0;
  virtual void release_event(Event event) = 0;
  virtual void synchronize() = 0;  // waits for all work on the device
};

class BlockCache {
 public:
  // `what` names the memory in errors ("memory of /gpu:0").
  BlockCache(BlockSource& source, std::string what);
  ~BlockCache();

  // A block of at least `bytes` for work on `stream`. Throws ResourceExhaustedError when the
  // source has no memory left even after the cache gave its blocks back.
  void* allocate(size_t bytes, Stream stream);
  // Returns a block; it becomes reusable on its stream now, elsewhere when its events are done.
  // `pending`, when given, is one more event to wait for (the cache releases it): the host
  // writes pinned buffers outside any stream, so they wait for the copy that reads them.
  void deallocate(void* ptr, Event pending = nullptr);
  // Marks a block in use as also used by work on `stream` (a copy on the copy stream).
  void record_stream(void* ptr, Stream stream);

  AllocatorStats stats() const;
  void release_cached();                // waits for the device, then gives every cached block back
  void set_cache_limit(int64_t bytes);  // negative: the automatic limit
  void reset_peak();

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    Stream stream = nullptr;            // the stream it was allocated for
    std::vector<Stream> other_streams;  // record_stream while in use
    std::vector<Event> pending;         // recorded on other_streams when freed
  };
  struct SizeClass {
    std::vector<Block> blocks;
    uint64_t last_used = 0;
  };
  using Key = std::pair<size_t, Stream>;  // size class and stream

  bool ready_locked(Block& block);
  int64_t limit_locked() const;
  void evict_locked();  // gives back one ready block of the class used longest ago, if any
  void release_locked();
  void free_block_locked(Block& block);

  BlockSource& source_;
  std::string what_;
  mutable std::mutex mutex_;
  std::map<Key, SizeClass> free_;
  std::unordered_map<void*, Block> in_use_;
  AllocatorStats stats_;
  int64_t limit_ = -1;
  uint64_t clock_ = 0;
};

}  // namespace est::ops::cuda
