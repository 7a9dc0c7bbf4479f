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
//
// Private pools serve CUDA graph capture (graph.h), as PyTorch's graph mempools do: while a
// stream is captured, the capturing thread's allocations on it come from the pool (fresh blocks
// from the source, or the pool's own freed ones), and a block that thread frees then joins the
// pool, whoever allocated it (the graph's kernels may still touch it). Other threads allocating
// for the same stream meanwhile (prefetch_to_device's worker staging the next batch) are served
// by the shared cache, as PyTorch's pools filter by the allocating thread's capture: their
// blocks are not the graph's and must not be held back for it. The pool's blocks, in use or free,
// are never handed to work outside the pool, so the addresses baked into the graph stay valid
// across replays; when the graph goes (release_pool), the pool's free blocks go back to the source
// and the rest follow as they are freed. While any stream is captured nothing is given back to the
// source (that would synchronise the device, which capture forbids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
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

  // Private pools (see above). create_pool returns a new pool's id (never 0); begin_pool makes
  // the calling thread's allocations for `stream` come from it until end_pool(stream).
  // release_pool: the pool's owner is gone (InternalError while a stream still uses it).
  uint64_t create_pool();
  void begin_pool(uint64_t pool, Stream stream);
  void end_pool(Stream stream);
  void release_pool(uint64_t pool);
  // Bytes the pool holds (blocks in use and free); 0 once released and every block is back.
  int64_t pool_bytes(uint64_t pool) const;
  bool capturing() const;  // some stream allocates from a pool now

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    Stream stream = nullptr;            // the stream it was allocated for
    std::vector<Stream> other_streams;  // record_stream while in use
    std::vector<Event> pending;         // recorded on other_streams when freed
    uint64_t pool = 0;                  // the private pool that holds it, 0: the shared cache
  };
  struct Pool {
    std::map<size_t, std::vector<Block>> free;  // by size class
    int64_t bytes = 0;                          // held: in use and free
    bool released = false;
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
  void* allocate_pooled_locked(size_t size, Stream stream, uint64_t pool);
  void deallocate_pooled_locked(Block block);

  BlockSource& source_;
  std::string what_;
  mutable std::mutex mutex_;
  std::map<Key, SizeClass> free_;
  std::unordered_map<void*, Block> in_use_;
  AllocatorStats stats_;
  int64_t limit_ = -1;
  uint64_t clock_ = 0;
  std::map<uint64_t, Pool> pools_;
  struct Capture {
    uint64_t pool;
    std::thread::id thread;  // the capturing thread: only its allocations use the pool
  };
  std::map<Stream, Capture> pool_of_stream_;  // streams being captured
  // The pool serving this thread's allocations for `stream`, 0: the shared cache.
  uint64_t pool_for_locked(Stream stream) const;
  uint64_t next_pool_ = 1;
};

}  // namespace est::ops::cuda
