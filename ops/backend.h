// Which kernels run an op. The Eigen reference kernels always exist; oneDNN (CPU) and CUDA are
// optional at build time. CPU ops use oneDNN where it supports the op and dtype (float32), the
// reference otherwise. A BackendGuard forces a choice on the current thread: the op harness
// runs every case once per backend this way.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace est::ops {

enum class Backend : uint8_t { kReference, kOneDnn, kCuda };

std::string_view backend_name(Backend backend);  // "reference", "onednn", "cuda"
bool backend_available(Backend backend);
std::vector<Backend> available_cpu_backends();  // kReference first

// The backend CPU ops use on this thread: kOneDnn when available, unless a guard says otherwise.
Backend cpu_backend();
// True when the current thread should run a float32 op through oneDNN.
inline bool use_onednn() { return cpu_backend() == Backend::kOneDnn; }

class BackendGuard {
 public:
  explicit BackendGuard(Backend cpu_backend);  // throws if that backend is not built in
  ~BackendGuard();
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  Backend previous_;
};

// Counters of the kernel caches (oneDNN primitives and reorders). A steady-state training
// step creates nothing: `created` stays constant while `hits` grows.
struct KernelCacheStats {
  int64_t created = 0;
  int64_t hits = 0;
};
KernelCacheStats kernel_cache_stats();

// Intra-op threads for CPU kernels (OpenMP) on the calling thread. Defaults to all cores; a
// strategy with several CPU replicas gives each replica thread its share.
int num_threads();
void set_num_threads(int threads);

}  // namespace est::ops
