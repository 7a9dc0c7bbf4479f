// Backend selection and intra-op threading.
#include "ops/backend.h"

#include <omp.h>

#include <string>

#include "ops/error.h"

#if EST_HAVE_ONEDNN
namespace est::ops::onednn {
KernelCacheStats cache_stats();
}
#endif

namespace est::ops {
namespace {
constexpr Backend kDefaultCpuBackend = EST_HAVE_ONEDNN ? Backend::kOneDnn : Backend::kReference;
thread_local Backend t_cpu_backend = kDefaultCpuBackend;
}  // namespace

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::kReference: return "reference";
    case Backend::kOneDnn: return "onednn";
    case Backend::kCuda: return "cuda";
  }
  return "unknown";
}

bool backend_available(Backend backend) {
  switch (backend) {
    case Backend::kReference: return true;
    case Backend::kOneDnn: return EST_HAVE_ONEDNN != 0;
    case Backend::kCuda: return false;  // the CUDA backend registers itself when built
  }
  return false;
}

std::vector<Backend> available_cpu_backends() {
  std::vector<Backend> backends{Backend::kReference};
  if (backend_available(Backend::kOneDnn)) backends.push_back(Backend::kOneDnn);
  return backends;
}

Backend cpu_backend() { return t_cpu_backend; }

BackendGuard::BackendGuard(Backend backend) : previous_(t_cpu_backend) {
  if (backend == Backend::kCuda || !backend_available(backend))
    throw InvalidArgumentError("backend '" + std::string(backend_name(backend)) +
                               "' cannot run CPU ops in this build");
  t_cpu_backend = backend;
}

BackendGuard::~BackendGuard() { t_cpu_backend = previous_; }

KernelCacheStats kernel_cache_stats() {
#if EST_HAVE_ONEDNN
  return onednn::cache_stats();
#else
  return {};
#endif
}

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int threads) {
  if (threads < 1)
    throw InvalidArgumentError("set_num_threads: need at least one thread, got " +
                               std::to_string(threads));
  omp_set_num_threads(threads);
}

}  // namespace est::ops
