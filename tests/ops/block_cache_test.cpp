// The caching logic of the CUDA allocator and pinned buffers (ops/cuda/block_cache.h) over a
// fake source that hands out host memory and events the test completes by hand: steady-state
// reuse without new allocations, stream-ordered reuse, blocks held back by pending events,
// running out of memory, the bounded cache, and the private pools of CUDA graph capture. Runs
// everywhere; the real source is exercised by the GPU tests (test_ops_gpu).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "ops/cuda/block_cache.h"
#include "ops/error.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops;
using est::ops::cuda::BlockCache;
using est::ops::cuda::BlockSource;
using est::ops::cuda::Event;
using est::ops::cuda::Stream;
using est::testing::contains;
using est::testing::error_message;

namespace {

// Host memory up to `capacity` bytes; an event is an integer id, done once complete() says so.
class FakeSource final : public BlockSource {
 public:
  explicit FakeSource(size_t capacity) : capacity_(capacity) {}
  ~FakeSource() override { CHECK(used_ == 0); }

  void* allocate(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    ++allocations;
    void* ptr = std::malloc(bytes);
    sizes_[ptr] = bytes;
    return ptr;
  }
  void free(void* ptr) override {
    used_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    std::free(ptr);
  }
  Event record_event(Stream stream) override {
    recorded_on.push_back(stream);
    return reinterpret_cast<Event>(++next_event_);
  }
  bool event_done(Event event) override { return done_.count(event) > 0 || synchronized; }
  void release_event(Event event) override { released.insert(event); }
  void synchronize() override { synchronized = true; }

  void complete(Event event) { done_.insert(event); }
  Event last_event() const { return reinterpret_cast<Event>(next_event_); }

  int allocations = 0;
  bool synchronized = false;
  std::vector<Stream> recorded_on;
  std::set<Event> released;

 private:
  size_t capacity_, used_ = 0;
  uintptr_t next_event_ = 0;
  std::map<void*, size_t> sizes_;
  std::set<Event> done_;
};

Stream stream(uintptr_t id) { return reinterpret_cast<Stream>(id); }

}  // namespace

TEST_CASE("block cache: a steady state of the same sizes allocates nothing new") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  for (int step = 0; step < 5; ++step) {
    void* a = cache.allocate(1000, stream(1));
    void* b = cache.allocate(300000, stream(1));
    void* c = cache.allocate(1000, stream(1));
    cache.deallocate(b);
    cache.deallocate(a);
    cache.deallocate(c);
  }
  CHECK(source.allocations == 3);
  const AllocatorStats stats = cache.stats();
  CHECK(stats.system_allocations == 3);
  CHECK(stats.allocations == 15);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.bytes_cached ==
        static_cast<int64_t>(2 * allocation_size(1000) + allocation_size(300000)));
  CHECK(stats.peak_bytes_in_use == stats.bytes_cached);
}

TEST_CASE("block cache: a freed block is reused on its own stream, not on another") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  void* a = cache.allocate(4096, stream(1));
  cache.deallocate(a);
  void* b = cache.allocate(4096, stream(2));  // another stream: kernels there may run earlier
  CHECK(b != a);
  void* c = cache.allocate(4096, stream(1));  // its stream runs in order: reuse at once
  CHECK(c == a);
  cache.deallocate(b);
  cache.deallocate(c);
  CHECK(source.allocations == 2);
}

TEST_CASE("block cache: a block used on another stream waits for that stream's event") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  void* a = cache.allocate(4096, stream(1));
  cache.record_stream(a, stream(9));  // e.g. read by a copy on the copy stream
  cache.deallocate(a);
  REQUIRE(source.recorded_on.size() == 1);
  CHECK(source.recorded_on[0] == stream(9));
  const Event copy_done = source.last_event();
  void* b = cache.allocate(4096, stream(1));
  CHECK(b != a);  // the copy may still be reading it
  source.complete(copy_done);
  cache.deallocate(b);
  void* c = cache.allocate(4096, stream(1));
  CHECK((c == a || c == b));
  void* d = cache.allocate(4096, stream(1));
  CHECK(std::set<void*>{c, d} == std::set<void*>{a, b});
  CHECK(source.released.count(copy_done) == 1);  // back to the pool once done
  cache.deallocate(c);
  cache.deallocate(d);
}

TEST_CASE("block cache: a pinned buffer comes back only after its copy's event") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "pinned host memory of fake");
  void* staging = cache.allocate(1 << 20, stream(7));
  const Event copy = source.record_event(stream(7));
  cache.deallocate(staging, copy);
  void* next = cache.allocate(1 << 20, stream(7));
  CHECK(next != staging);  // the host would overwrite data the copy still reads
  source.complete(copy);
  cache.deallocate(next);
  void* again = cache.allocate(1 << 20, stream(7));
  CHECK((again == staging || again == next));
  cache.deallocate(again);
}

TEST_CASE("block cache: out of memory, the cache gives its blocks back and retries") {
  FakeSource source(3 * 65536);
  BlockCache cache(source, "memory of fake");
  void* a = cache.allocate(65536, stream(1));
  void* b = cache.allocate(65536, stream(2));
  cache.deallocate(a);
  cache.deallocate(b);
  // Another size class: nothing cached fits, and the source is full only with the cache.
  void* c = cache.allocate(2 * 65536, stream(1));
  CHECK(source.synchronized);  // waited for the device before freeing
  CHECK(cache.stats().bytes_cached == 0);
  CHECK(cache.stats().system_frees == 2);
  const std::string message =
      error_message<ResourceExhaustedError>([&] { cache.allocate(2 * 65536, stream(1)); });
  CHECK(contains(message, "out of memory of fake allocating 131072 bytes"));
  CHECK(contains(message, "reduce the batch size"));
  CHECK(cache.stats().bytes_in_use == 2 * 65536);  // the failed request is not counted
  cache.deallocate(c);
}

TEST_CASE("block cache: the cached bytes stay under the limit, oldest size class first") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  cache.set_cache_limit(4 * 65536);
  void* old_block = cache.allocate(65536, stream(1));
  void* newer = cache.allocate(2 * 65536, stream(1));
  void* newest = cache.allocate(65536 + 8192, stream(1));
  cache.deallocate(old_block);
  cache.deallocate(newer);
  cache.deallocate(newest);  // over the limit: the class used longest ago goes first
  const AllocatorStats stats = cache.stats();
  CHECK(stats.cache_limit == 4 * 65536);
  CHECK(stats.bytes_cached == 2 * 65536 + 65536 + 8192);
  CHECK(stats.system_frees == 1);
  CHECK(cache.stats().system_allocations == 3);
  void* fresh = cache.allocate(65536, stream(1));  // its class was evicted: a new block
  CHECK(cache.stats().system_allocations == 4);
  cache.deallocate(fresh);
  cache.release_cached();
  CHECK(cache.stats().bytes_cached == 0);
  cache.set_cache_limit(-1);
  CHECK(cache.stats().cache_limit == int64_t{64} << 20);  // automatic: at least 64 MiB
}

TEST_CASE("block cache: freeing a pointer it did not hand out is an internal error") {
  FakeSource source(1 << 20);
  BlockCache cache(source, "memory of fake");
  int x = 0;
  CHECK(contains(error_message<InternalError>([&] { cache.deallocate(&x); }),
                 "is not a block in use of memory of fake"));
}

TEST_CASE("block cache: a captured stream allocates from its private pool, kept from others") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  void* shared = cache.allocate(4096, stream(1));
  cache.deallocate(shared);
  const uint64_t pool = cache.create_pool();
  CHECK(pool != 0);
  cache.begin_pool(pool, stream(1));
  CHECK(cache.capturing());
  void* input = cache.allocate(4096, stream(1));
  CHECK(input != shared);  // the shared cache's block is not the pool's
  void* temporary = cache.allocate(8192, stream(1));
  cache.deallocate(temporary);
  void* output = cache.allocate(8192, stream(1));
  CHECK(output == temporary);  // reused inside the capture: the graph keeps the stream's order
  cache.deallocate(input);
  void* other = cache.allocate(4096, stream(2));  // another stream: the shared cache
  CHECK(other != input);
  cache.end_pool(stream(1));
  CHECK(!cache.capturing());
  const int64_t held = static_cast<int64_t>(allocation_size(4096) + allocation_size(8192));
  CHECK(cache.pool_bytes(pool) == held);
  // After the capture, eager work never gets the pool's blocks, free or not.
  void* eager = cache.allocate(4096, stream(1));
  CHECK(eager == shared);
  void* fresh = cache.allocate(4096, stream(1));
  CHECK(fresh != input);
  CHECK(cache.stats().system_allocations == 5);
  cache.deallocate(output);  // the graph's output: back to its pool
  CHECK(cache.pool_bytes(pool) == held);
  const int64_t frees = cache.stats().system_frees;
  cache.release_pool(pool);  // the graph is gone: its blocks go back to the source
  CHECK(cache.pool_bytes(pool) == 0);
  CHECK(cache.stats().system_frees == frees + 2);
  cache.deallocate(eager);
  cache.deallocate(fresh);
  cache.deallocate(other);
  CHECK(cache.stats().bytes_in_use == 0);
}

TEST_CASE("block cache: a block freed during capture joins the pool until it is released") {
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  void* before = cache.allocate(65536, stream(1));  // e.g. last step's activations
  const uint64_t pool = cache.create_pool();
  cache.begin_pool(pool, stream(1));
  cache.deallocate(before);  // the captured kernels before this point may have read it
  void* reused = cache.allocate(65536, stream(1));
  CHECK(reused == before);
  cache.deallocate(reused);
  cache.end_pool(stream(1));
  CHECK(cache.pool_bytes(pool) == 65536);
  void* eager = cache.allocate(65536, stream(1));
  CHECK(eager != before);  // a replay would still write it
  cache.deallocate(eager);
  // A block still in use when the pool is released goes back when it is freed.
  const uint64_t second = cache.create_pool();
  cache.begin_pool(second, stream(1));
  void* output = cache.allocate(4096, stream(1));
  cache.end_pool(stream(1));
  cache.release_pool(second);
  CHECK(cache.pool_bytes(second) == static_cast<int64_t>(allocation_size(4096)));
  const int64_t frees = cache.stats().system_frees;
  cache.deallocate(output);
  CHECK(cache.pool_bytes(second) == 0);
  CHECK(cache.stats().system_frees == frees + 1);
  cache.release_pool(pool);
  CHECK(cache.pool_bytes(pool) == 0);
}

TEST_CASE("block cache: another thread allocating for a captured stream gets shared blocks") {
  // prefetch_to_device's worker stages the next batch while the main thread captures a step:
  // its blocks must not come from (nor be freed into) the graph's pool.
  FakeSource source(size_t{1} << 30);
  BlockCache cache(source, "memory of fake");
  void* shared = cache.allocate(4096, stream(1));
  cache.deallocate(shared);
  const uint64_t pool = cache.create_pool();
  cache.begin_pool(pool, stream(1));
  void* captured = cache.allocate(4096, stream(1));
  void* staged = nullptr;
  std::thread worker([&] {
    staged = cache.allocate(4096, stream(1));
    void* temporary = cache.allocate(8192, stream(1));
    cache.deallocate(temporary);  // back to the shared cache, not the pool
  });
  worker.join();
  CHECK(staged == shared);  // the shared cache's free block
  CHECK(captured != shared);
  CHECK(cache.pool_bytes(pool) == static_cast<int64_t>(allocation_size(4096)));
  cache.end_pool(stream(1));
  void* eager = cache.allocate(8192, stream(1));  // the worker's freed block is shared again
  CHECK(cache.stats().system_allocations == 3);
  cache.deallocate(eager);
  cache.deallocate(staged);
  cache.deallocate(captured);
  cache.release_pool(pool);
  CHECK(cache.pool_bytes(pool) == 0);
  CHECK(cache.stats().bytes_in_use == 0);
}

TEST_CASE("block cache: nothing goes back to the source while a stream is captured") {
  FakeSource source(3 * 65536);
  BlockCache cache(source, "memory of fake");
  void* a = cache.allocate(65536, stream(2));
  void* b = cache.allocate(65536, stream(2));
  const uint64_t pool = cache.create_pool();
  cache.begin_pool(pool, stream(1));
  cache.set_cache_limit(0);  // would evict at once outside a capture
  cache.deallocate(a);
  cache.release_cached();
  CHECK(cache.stats().bytes_cached == 65536);
  CHECK(cache.stats().system_frees == 0);
  CHECK(!source.synchronized);  // synchronising the device would break the capture
  void* c = cache.allocate(65536, stream(1));
  const std::string message =
      error_message<ResourceExhaustedError>([&] { cache.allocate(65536, stream(1)); });
  CHECK(contains(message, "during a CUDA graph capture"));
  CHECK(!source.synchronized);
  CHECK(contains(error_message<FailedPreconditionError>([&] { cache.begin_pool(pool, stream(1)); }),
                 "already allocates from a private pool"));
  CHECK(
      contains(error_message<InternalError>([&] { cache.release_pool(pool); }), "is still in use"));
  cache.deallocate(c);
  cache.end_pool(stream(1));
  cache.release_pool(pool);
  cache.deallocate(b);
  cache.release_cached();
  CHECK(cache.stats().bytes_cached == 0);
}
