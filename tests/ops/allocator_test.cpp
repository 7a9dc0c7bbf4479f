// The CPU caching allocator's bound and trim: shapes that change every step keep the cache
// under its limit (explicit or automatic), the least recently used sizes go first, trim gives
// the cached blocks (and, for a large block, the pages) back, and the stats' fields add up.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>

#include "ops/allocator.h"
#include "ops/ops.h"

using namespace est;
using namespace est::ops;

namespace {

// Restores the automatic limit when a test ends.
struct LimitGuard {
  explicit LimitGuard(int64_t bytes) { allocator_for(Device::cpu()).set_cache_limit(bytes); }
  ~LimitGuard() { allocator_for(Device::cpu()).set_cache_limit(-1); }
};

// A stand-in for a training step at batch `batch`: a few temporaries of sizes that depend on it.
void ragged_step(int64_t batch) {
  Tensor x = Tensor::ones({batch, 300});
  Tensor h = relu(x * 2.0f);
  Tensor y = sum(h * h, {1});
  CHECK(y.dim(0) == batch);
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace

TEST_CASE("allocator: shapes that change every step keep the cache under an explicit limit") {
  trim_memory();
  const int64_t limit = int64_t{1} << 20;
  LimitGuard guard(limit);
  const AllocatorStats start = memory_stats();
  CHECK(start.cache_limit == limit);
  for (int64_t batch = 1; batch <= 400; ++batch) {
    ragged_step(batch);
    const AllocatorStats now = memory_stats();
    REQUIRE(now.bytes_cached <= limit);
    CHECK(now.bytes_in_use == start.bytes_in_use);  // every temporary was freed
  }
  const AllocatorStats end = memory_stats();
  CHECK(end.system_frees > start.system_frees);  // evictions happened
  CHECK(end.bytes_cached > 0);                   // but the cache still keeps the recent sizes
}

TEST_CASE(
    "allocator: the automatic limit follows the peak, and a repeated step still allocates "
    "nothing") {
  trim_memory();
  const AllocatorStats start = memory_stats();
  CHECK(start.cache_limit == std::max<int64_t>(int64_t{64} << 20, 2 * start.peak_bytes_in_use));
  for (int64_t batch = 1; batch <= 100; ++batch) {
    ragged_step(batch * 97);  // up to 11.6 MB per temporary: the peak, and so the limit, grow
    const AllocatorStats now = memory_stats();
    REQUIRE(now.bytes_cached <= now.cache_limit);
    CHECK(now.cache_limit == std::max<int64_t>(int64_t{64} << 20, 2 * now.peak_bytes_in_use));
  }
  ragged_step(5000);
  const AllocatorStats before = memory_stats();
  for (int i = 0; i < 5; ++i) ragged_step(5000);
  CHECK(memory_stats().system_allocations == before.system_allocations);
}

TEST_CASE("allocator: the size classes used longest ago are evicted first") {
  trim_memory();
  const int64_t block = 64 * 1024;  // one size class each: 64 KiB, 128 KiB, 192 KiB floats
  LimitGuard guard(6 * block);
  { Tensor a = Tensor::empty({block / 4}); }      // cached: 64 KiB
  { Tensor b = Tensor::empty({2 * block / 4}); }  // cached: 64 + 128 KiB
  { Tensor a = Tensor::empty({block / 4}); }      // reused: 64 KiB is now the most recent
  const AllocatorStats before = memory_stats();
  { Tensor c = Tensor::empty({4 * block / 4}); }  // 256 KiB: the 128 KiB block must go
  CHECK(memory_stats().system_frees == before.system_frees + 1);
  CHECK(memory_stats().bytes_cached == 5 * block);
  const int64_t allocations = memory_stats().system_allocations;
  { Tensor a = Tensor::empty({block / 4}); }  // still cached
  CHECK(memory_stats().system_allocations == allocations);
  { Tensor b = Tensor::empty({2 * block / 4}); }  // evicted: a new system allocation
  CHECK(memory_stats().system_allocations == allocations + 1);
}

TEST_CASE(
    "allocator: a block larger than the limit is not cached, and a zero limit caches "
    "nothing") {
  trim_memory();
  LimitGuard guard(0);
  const AllocatorStats before = memory_stats();
  { Tensor t = Tensor::empty({1000}); }
  CHECK(memory_stats().bytes_cached == 0);
  CHECK(memory_stats().system_frees == before.system_frees + 1);
  { Tensor t = Tensor::empty({1000}); }
  CHECK(memory_stats().system_allocations == before.system_allocations + 2);
}

TEST_CASE("allocator: trim gives cached blocks back and resets the peak") {
  trim_memory();
  const int64_t big = int64_t{64} << 20;  // above glibc's largest mmap threshold: its own mapping
  const int64_t resident_before = resident_bytes();
  {
    Tensor t = Tensor::ones({big / 4});
    CHECK(resident_bytes() - resident_before > big / 2);
  }
  const AllocatorStats cached = memory_stats();
  CHECK(cached.bytes_cached >= big);
  CHECK(cached.peak_bytes_in_use >= cached.bytes_in_use + big);
  CHECK(resident_bytes() - resident_before > big / 2);  // the cache holds the pages

  CHECK(trim_memory() == cached.bytes_cached);
  const AllocatorStats trimmed = memory_stats();
  CHECK(trimmed.bytes_cached == 0);
  CHECK(trimmed.system_frees > cached.system_frees);
  CHECK(trimmed.peak_bytes_in_use == trimmed.bytes_in_use);
  CHECK(trimmed.bytes_in_use == cached.bytes_in_use);
  CHECK(resident_bytes() - resident_before < big / 2);  // and the pages went back
  CHECK(trim_memory() == 0);
}

TEST_CASE("allocator: the stats count requests and system calls") {
  trim_memory();
  const AllocatorStats before = memory_stats();
  {
    Tensor a = Tensor::empty({1000});  // 4000 bytes: one 4096-byte block
    const AllocatorStats held = memory_stats();
    CHECK(held.allocations == before.allocations + 1);
    CHECK(held.system_allocations == before.system_allocations + 1);
    CHECK(held.bytes_in_use == before.bytes_in_use + 4096);
    CHECK(held.peak_bytes_in_use >= held.bytes_in_use);
  }
  CHECK(memory_stats().bytes_cached == before.bytes_cached + 4096);
  { Tensor again = Tensor::empty({1000}); }
  CHECK(memory_stats().allocations == before.allocations + 2);
  CHECK(memory_stats().system_allocations == before.system_allocations + 1);
}

TEST_CASE("allocator: a system allocation first frees the sizes unused for 4096 events") {
  trim_memory();
  LimitGuard guard(int64_t{1} << 40);     // no eviction for the limit's sake
  const int64_t big = int64_t{32} << 20;  // one block of a loaded file, freed once
  { Tensor file = Tensor::empty({big / 4}); }
  CHECK(memory_stats().bytes_cached >= big);
  for (int i = 0; i < 3000; ++i) Tensor step = Tensor::empty({1000});  // 6000 events
  const AllocatorStats before = memory_stats();
  { Tensor other = Tensor::empty({3 * big / 8}); }  // a new size: the stale block goes first
  const AllocatorStats after = memory_stats();
  CHECK(after.system_frees == before.system_frees + 1);
  CHECK(after.bytes_cached == 3 * big / 2 + 4096);  // the new block and the recent small one
  // A size used recently stays: the new block is only 12 events old.
  { Tensor again = Tensor::empty({big / 2}); }
  CHECK(memory_stats().system_frees == after.system_frees);
}
