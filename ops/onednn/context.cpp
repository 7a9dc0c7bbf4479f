// Engine, stream and primitive cache, one set per thread.
#include "ops/onednn/context.h"

#include <omp.h>

#include <atomic>
#include <map>

#include "ops/backend.h"

namespace est::ops::onednn {
namespace {
std::atomic<int64_t> g_created{0};
std::atomic<int64_t> g_hits{0};
}  // namespace

dnnl::engine& engine() {
  thread_local dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory::desc plain_desc(const Shape& shape, dnnl::memory::format_tag tag) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, engine(), const_cast<void*>(t.raw_data()));
}

dnnl::memory wrap_at(const Tensor& t, int64_t offset, const dnnl::memory::desc& desc) {
  const auto* base = static_cast<const char*>(t.raw_data());
  return dnnl::memory(
      desc, engine(),
      const_cast<char*>(base + static_cast<size_t>(offset) * dtype_size(t.dtype())));
}

void count_creation() { g_created.fetch_add(1, std::memory_order_relaxed); }
void count_hit() { g_hits.fetch_add(1, std::memory_order_relaxed); }

namespace detail {
std::unordered_map<std::string, CacheEntry>& thread_cache() {
  using Cache = std::unordered_map<std::string, CacheEntry>;
  thread_local std::map<int, Cache> caches;  // by OpenMP thread count; nodes never move
  thread_local int threads = 0;
  thread_local Cache* cache = nullptr;
  const int now = omp_get_max_threads();
  if (now != threads || cache == nullptr) {
    cache = &caches[now];
    threads = now;
  }
  return *cache;
}
}  // namespace detail

KernelCacheStats cache_stats() { return {g_created.load(), g_hits.load()}; }

}  // namespace est::ops::onednn
