// Helpers shared by the oneDNN kernels (matmul, conv, pooling, batch norm): cache keys,
// NHWC descriptors, attributes with user-managed scratchpads, buffers from the caching
// allocator, and "reorder only if the layout differs". Internal to ops/onednn.
#pragma once

#include <dnnl.hpp>

#include <initializer_list>
#include <string>
#include <unordered_map>

#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/onednn/context.h"
#include "ops/tensor.h"

namespace est::ops::onednn {

// cached<T>(key, make) for the kernels' plans (primitive descriptors and primitives): a oneDNN
// failure to build one becomes an UnimplementedError naming `op`, on which the dispatchers fall
// back to the reference kernels.
template <class T, class Make>
T& cached_plan(const std::string& key, const char* op, Make&& make) {
  return cached<T>(key, [&]() -> T {
    try {
      return make();
    } catch (const dnnl::error& e) {
      throw UnimplementedError(std::string(op) + ": oneDNN has no kernel for this case (" +
                               e.what() + "); key " + key);
    }
  });
}

// "prefix/a/b/c": the key of a cached primitive, from the numbers that define it.
std::string make_key(const char* prefix, std::initializer_list<int64_t> values);
// Appends the whole window geometry to a key.
std::string window_key(const char* prefix, const cpu::Window2D& window,
                       std::initializer_list<int64_t> extra);

// f32 descriptor of an NHWC tensor, dims in oneDNN's order {N, C, H, W}.
dnnl::memory::desc nhwc_desc(int64_t n, int64_t c, int64_t h, int64_t w);

// Attributes every kernel uses: scratchpad owned by the caller (so it comes from the caching
// allocator) and the activation as an eltwise post-op (none for kNone).
dnnl::primitive_attr make_attr(Activation activation);

// A byte buffer of `desc`'s size from the caching allocator (undefined when the size is 0).
Tensor buffer_for(const dnnl::memory::desc& desc);

// Runs `primitive` on the thread's stream with `args` plus a scratchpad of `pd`'s size.
void execute(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd,
             std::unordered_map<int, dnnl::memory> args);

// A reorder from `from` to `to`, cached. Callers check `from != to` first.
struct ReorderPlan {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder primitive;
};
ReorderPlan& cached_reorder(const std::string& key, const dnnl::memory::desc& from,
                            const dnnl::memory::desc& to);

// Copies `source` (laid out as `from`) into `target` (laid out as `to`) through a cached reorder.
void reorder_into(const std::string& key, const Tensor& source, const dnnl::memory::desc& from,
                  const Tensor& target, const dnnl::memory::desc& to);

}  // namespace est::ops::onednn
