// oneDNN plumbing shared by the CPU kernels: one engine and stream per thread, and a per-thread
// cache of primitives and reorders keyed by a string describing op, shapes, dtype and
// attributes. Each thread (a replica) builds its own primitives once; no lock on the hot path.
// A primitive keeps the thread count it was built under (oneDNN sizes its work split then, and
// its own primitive cache keys on it too), so the cache is one map per thread count: when the
// thread governor (ops/thread_governor.h) shrinks a team, the kernels build, once, primitives
// that run on the smaller one.
#pragma once

#include <dnnl.hpp>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "ops/tensor.h"

namespace est::ops::onednn {

dnnl::engine& engine();
dnnl::stream& stream();

// Returns the cached object for `key`, building it with `make()` on first use.
// The counters behind kernel_cache_stats() count hits and creations.
template <class T>
T& cached(const std::string& key, const std::function<T()>& make);

// A plain-layout memory descriptor for a contiguous tensor of the given shape.
dnnl::memory::desc plain_desc(const Shape& shape, dnnl::memory::format_tag tag);
// Wraps a tensor's buffer (no copy).
dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& desc);
// Wraps a tensor's buffer from element `offset` on (no copy): a part of a batch.
dnnl::memory wrap_at(const Tensor& t, int64_t offset, const dnnl::memory::desc& desc);

void count_creation();
void count_hit();

namespace detail {
struct CacheEntry {
  std::shared_ptr<void> object;
};
std::unordered_map<std::string, CacheEntry>& thread_cache();
}  // namespace detail

template <class T>
T& cached(const std::string& key, const std::function<T()>& make) {
  auto& cache = detail::thread_cache();
  auto it = cache.find(key);
  if (it != cache.end()) {
    count_hit();
    return *static_cast<T*>(it->second.object.get());
  }
  count_creation();
  auto object = std::make_shared<T>(make());
  T& ref = *object;
  cache.emplace(key, detail::CacheEntry{std::move(object)});
  return ref;
}

}  // namespace est::ops::onednn
