// BlockCache: free lists per (size class, stream), events that hold a block back until the
// other streams that used it are done, the bounded, least recently used cache, and the private
// pools of CUDA graphs.
#include "ops/cuda/block_cache.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/error.h"

namespace est::ops::cuda {
namespace {
constexpr int64_t kMinimumAutomaticLimit = int64_t{64} << 20;
}  // namespace

BlockCache::BlockCache(BlockSource& source, std::string what)
    : source_(source), what_(std::move(what)) {}

BlockCache::~BlockCache() {
  std::lock_guard lock(mutex_);
  release_locked();
}

bool BlockCache::ready_locked(Block& block) {
  while (!block.pending.empty()) {
    if (!source_.event_done(block.pending.back())) return false;
    source_.release_event(block.pending.back());
    block.pending.pop_back();
  }
  return true;
}

void* BlockCache::allocate(size_t bytes, Stream stream) {
  const size_t size = allocation_size(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  if (const uint64_t pool = pool_for_locked(stream); pool != 0)
    return allocate_pooled_locked(size, stream, pool);
  auto found = free_.find({size, stream});
  if (found != free_.end()) {
    std::vector<Block>& blocks = found->second.blocks;
    for (size_t i = blocks.size(); i-- > 0;) {
      if (!ready_locked(blocks[i])) continue;
      Block block = std::move(blocks[i]);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      found->second.last_used = ++clock_;
      stats_.bytes_cached -= static_cast<int64_t>(size);
      if (blocks.empty()) free_.erase(found);
      void* ptr = block.ptr;
      in_use_.emplace(ptr, std::move(block));
      return ptr;
    }
  }
  void* ptr = source_.allocate(size);
  if (ptr == nullptr && stats_.bytes_cached > 0 && pool_of_stream_.empty()) {
    release_locked();
    ptr = source_.allocate(size);
  }
  if (ptr == nullptr) {
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    throw ResourceExhaustedError(fmt::format(
        "out of {} allocating {} bytes for a tensor ({} bytes in use); reduce the batch size or "
        "the model size",
        what_, size, stats_.bytes_in_use));
  }
  ++stats_.system_allocations;
  in_use_.emplace(ptr, Block{.ptr = ptr, .size = size, .stream = stream});
  return ptr;
}

void BlockCache::record_stream(void* ptr, Stream stream) {
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end())
    throw InternalError(fmt::format("record_stream: {} is not a block in use of {}", ptr, what_));
  Block& block = it->second;
  if (stream != block.stream && std::find(block.other_streams.begin(), block.other_streams.end(),
                                          stream) == block.other_streams.end())
    block.other_streams.push_back(stream);
}

void BlockCache::deallocate(void* ptr, Event pending) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end())
    throw InternalError(fmt::format("deallocate: {} is not a block in use of {}", ptr, what_));
  Block block = std::move(it->second);
  in_use_.erase(it);
  if (pending != nullptr) block.pending.push_back(pending);
  for (Stream other : block.other_streams) block.pending.push_back(source_.record_event(other));
  block.other_streams.clear();
  const size_t size = block.size;
  stats_.bytes_in_use -= static_cast<int64_t>(size);
  if (block.pool == 0) {  // freed by the capture of its stream: the graph may still use it
    if (const uint64_t pool = pool_for_locked(block.stream); pool != 0) {
      block.pool = pool;
      pools_.at(block.pool).bytes += static_cast<int64_t>(size);
    }
  }
  if (block.pool != 0) {
    deallocate_pooled_locked(std::move(block));
    return;
  }
  const bool capturing = !pool_of_stream_.empty();
  const int64_t limit = limit_locked();
  if (!capturing && static_cast<int64_t>(size) > limit && ready_locked(block)) {  // too large
    free_block_locked(block);
    return;
  }
  SizeClass& size_class = free_[{size, block.stream}];
  size_class.blocks.push_back(std::move(block));
  size_class.last_used = ++clock_;
  stats_.bytes_cached += static_cast<int64_t>(size);
  while (!capturing && stats_.bytes_cached > limit) {
    const int64_t before = stats_.bytes_cached;
    evict_locked();
    if (stats_.bytes_cached == before) break;  // nothing evictable yet (events pending)
  }
}

AllocatorStats BlockCache::stats() const {
  std::lock_guard lock(mutex_);
  AllocatorStats result = stats_;
  result.cache_limit = limit_locked();
  return result;
}

void BlockCache::release_cached() {
  std::lock_guard lock(mutex_);
  release_locked();
}

void BlockCache::set_cache_limit(int64_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes < 0 ? -1 : bytes;
  while (pool_of_stream_.empty() && stats_.bytes_cached > limit_locked()) {
    const int64_t before = stats_.bytes_cached;
    evict_locked();
    if (stats_.bytes_cached == before) break;
  }
}

void BlockCache::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

int64_t BlockCache::limit_locked() const {
  if (limit_ >= 0) return limit_;
  return std::max(kMinimumAutomaticLimit, 2 * stats_.peak_bytes_in_use);
}

void BlockCache::free_block_locked(Block& block) {
  source_.free(block.ptr);
  ++stats_.system_frees;
}

void BlockCache::evict_locked() {
  // Size classes from the one used longest ago; the first ready block found goes.
  std::vector<std::map<Key, SizeClass>::iterator> order;
  for (auto it = free_.begin(); it != free_.end(); ++it) order.push_back(it);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a->second.last_used < b->second.last_used; });
  for (auto it : order) {
    std::vector<Block>& blocks = it->second.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!ready_locked(blocks[i])) continue;
      free_block_locked(blocks[i]);
      stats_.bytes_cached -= static_cast<int64_t>(it->first.first);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      if (blocks.empty()) free_.erase(it);
      return;
    }
  }
}

void BlockCache::release_locked() {
  if (free_.empty() || !pool_of_stream_.empty()) return;  // no synchronisation during capture
  source_.synchronize();                                  // every pending event is done after this
  for (auto& [key, size_class] : free_)
    for (Block& block : size_class.blocks) {
      ready_locked(block);
      free_block_locked(block);
    }
  free_.clear();
  stats_.bytes_cached = 0;
}

}  // namespace est::ops::cuda

namespace est::ops::cuda {

void* BlockCache::allocate_pooled_locked(size_t size, Stream stream, uint64_t pool) {
  Pool& p = pools_.at(pool);
  if (auto found = p.free.find(size); found != p.free.end()) {
    std::vector<Block>& blocks = found->second;
    for (size_t i = blocks.size(); i-- > 0;) {
      if (!ready_locked(blocks[i])) continue;
      Block block = std::move(blocks[i]);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      if (blocks.empty()) p.free.erase(found);
      void* ptr = block.ptr;
      block.stream = stream;
      in_use_.emplace(ptr, std::move(block));
      return ptr;
    }
  }
  void* ptr = source_.allocate(size);
  if (ptr == nullptr) {
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    throw ResourceExhaustedError(fmt::format(
        "out of {} allocating {} bytes for a tensor during a CUDA graph capture ({} bytes in "
        "use, {} cached); reduce the batch size, or trim the cache (ops::trim_memory) before "
        "capturing",
        what_, size, stats_.bytes_in_use, stats_.bytes_cached));
  }
  ++stats_.system_allocations;
  p.bytes += static_cast<int64_t>(size);
  in_use_.emplace(ptr, Block{.ptr = ptr, .size = size, .stream = stream, .pool = pool});
  return ptr;
}

void BlockCache::deallocate_pooled_locked(Block block) {
  auto it = pools_.find(block.pool);
  if (it == pools_.end())
    throw InternalError(
        fmt::format("deallocate: {} belongs to no private pool of {}", block.ptr, what_));
  Pool& p = it->second;
  const size_t size = block.size;
  if (!p.released) {
    p.free[size].push_back(std::move(block));
    return;
  }
  // Its graph is gone: back to the source, or to the shared cache when that cannot be now.
  p.bytes -= static_cast<int64_t>(size);
  if (pool_of_stream_.empty() && ready_locked(block)) {
    free_block_locked(block);
  } else {
    block.pool = 0;
    SizeClass& size_class = free_[{size, block.stream}];
    size_class.blocks.push_back(std::move(block));
    size_class.last_used = ++clock_;
    stats_.bytes_cached += static_cast<int64_t>(size);
  }
  if (p.bytes == 0) pools_.erase(it);
}

uint64_t BlockCache::create_pool() {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_pool_++;
  pools_.emplace(id, Pool{});
  return id;
}

void BlockCache::begin_pool(uint64_t pool, Stream stream) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || it->second.released)
    throw InternalError(fmt::format("begin_pool: {} has no private pool {}", what_, pool));
  if (!pool_of_stream_.emplace(stream, Capture{pool, std::this_thread::get_id()}).second)
    throw FailedPreconditionError(fmt::format(
        "a stream of {} already allocates from a private pool (a CUDA graph capture is under "
        "way on it): end that capture first",
        what_));
}

void BlockCache::end_pool(Stream stream) {
  std::lock_guard lock(mutex_);
  pool_of_stream_.erase(stream);
}

void BlockCache::release_pool(uint64_t pool) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || it->second.released) return;
  for (const auto& [stream, active] : pool_of_stream_)
    if (active.pool == pool)
      throw InternalError(
          fmt::format("release_pool: private pool {} of {} is still in use", pool, what_));
  Pool& p = it->second;
  p.released = true;
  std::map<size_t, std::vector<Block>> free = std::move(p.free);
  p.free.clear();
  const bool empty = p.bytes == 0;
  if (empty) {
    pools_.erase(it);
    return;
  }
  for (auto& [size, blocks] : free)
    for (Block& block : blocks) {
      block.pool = pool;
      deallocate_pooled_locked(std::move(block));  // may erase the pool
    }
}

int64_t BlockCache::pool_bytes(uint64_t pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  return it == pools_.end() ? 0 : it->second.bytes;
}

uint64_t BlockCache::pool_for_locked(Stream stream) const {
  auto active = pool_of_stream_.find(stream);
  if (active == pool_of_stream_.end() || active->second.thread != std::this_thread::get_id())
    return 0;
  return active->second.pool;
}

bool BlockCache::capturing() const {
  std::lock_guard lock(mutex_);
  return !pool_of_stream_.empty();
}

}  // namespace est::ops::cuda
