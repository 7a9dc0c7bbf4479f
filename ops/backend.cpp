// Backend selection: the per-kind table, the thread's guard, and the dispatch counters.
#include "ops/backend.h"

#include <array>
#include <atomic>
#include <string>

#include "ops/backend_table.h"
#include "ops/error.h"

#if EST_HAVE_ONEDNN
namespace est::ops::onednn {
KernelCacheStats cache_stats();
}
#endif
#if EST_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace est::ops {
namespace {

constexpr int kNumBackends = 3;
constexpr int kNoGuard = -1;
thread_local int t_forced_backend = kNoGuard;  // the active BackendGuard's backend

std::array<std::atomic<int64_t>, kNumOpKinds * kNumBackends>& dispatch_counters() {
  static std::array<std::atomic<int64_t>, kNumOpKinds * kNumBackends> counters{};
  return counters;
}

size_t counter_index(OpKind kind, Backend backend) {
  return static_cast<size_t>(kind) * kNumBackends + static_cast<size_t>(backend);
}

}  // namespace

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::kReference:
      return "reference";
    case Backend::kOneDnn:
      return "onednn";
    case Backend::kCuda:
      return "cuda";
  }
  return "unknown";
}

bool backend_built(Backend backend) {
  switch (backend) {
    case Backend::kReference:
      return true;
    case Backend::kOneDnn:
      return EST_HAVE_ONEDNN != 0;
    case Backend::kCuda:
      return EST_HAVE_CUDA != 0;
  }
  return false;
}

bool backend_available(Backend backend) {
  if (!backend_built(backend)) return false;
#if EST_HAVE_CUDA
  if (backend == Backend::kCuda) return cuda::device_count() > 0;
#endif
  return true;
}

std::string backend_unavailable_reason(Backend backend) {
  if (backend_available(backend)) return "";
  if (backend == Backend::kOneDnn)
    return "this build has no oneDNN (configured with -Donednn=disabled or without libdnnl-dev)";
  if (!backend_built(backend))
    return "this build has no CUDA backend (configure with -Dcuda=enabled where nvcc and the "
           "CUDA toolkit are installed)";
#if EST_HAVE_CUDA
  return "no GPU: " + cuda::no_device_reason();
#else
  return "unavailable";
#endif
}

std::vector<Backend> available_cpu_backends() {
  std::vector<Backend> backends{Backend::kReference};
  if (backend_available(Backend::kOneDnn)) backends.push_back(Backend::kOneDnn);
  return backends;
}

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kConvForward:
      return "conv_forward";
    case OpKind::kConvBackwardData:
      return "conv_backward_data";
    case OpKind::kConvBackwardWeights:
      return "conv_backward_weights";
    case OpKind::kMatmul:
      return "matmul";
    case OpKind::kPooling:
      return "pooling";
    case OpKind::kEltwise:
      return "eltwise";
    case OpKind::kSoftmax:
      return "softmax";
    case OpKind::kBatchNorm:
      return "batch_norm";
  }
  return "unknown";
}

std::vector<OpKind> all_op_kinds() {
  std::vector<OpKind> kinds;
  for (int i = 0; i < kNumOpKinds; ++i) kinds.push_back(static_cast<OpKind>(i));
  return kinds;
}

Backend preferred_cpu_backend(OpKind kind) {
  const Backend preferred = kPreferredCpuBackends[static_cast<size_t>(kind)].backend;
  return backend_available(preferred) ? preferred : Backend::kReference;
}

Backend cpu_backend_for(OpKind kind) {
  apply_thread_count();
  if (t_forced_backend != kNoGuard) return static_cast<Backend>(t_forced_backend);
  return preferred_cpu_backend(kind);
}

std::optional<Backend> forced_cpu_backend() {
  if (t_forced_backend == kNoGuard) return std::nullopt;
  return static_cast<Backend>(t_forced_backend);
}

BackendGuard::BackendGuard(Backend backend) : previous_(t_forced_backend) {
  if (backend == Backend::kCuda || !backend_available(backend))
    throw InvalidArgumentError("backend '" + std::string(backend_name(backend)) +
                               "' cannot run CPU ops in this build");
  t_forced_backend = static_cast<int>(backend);
}

BackendGuard::~BackendGuard() { t_forced_backend = previous_; }

void count_dispatch(OpKind kind, Backend backend) {
  dispatch_counters()[counter_index(kind, backend)].fetch_add(1, std::memory_order_relaxed);
}

int64_t dispatch_count(OpKind kind, Backend backend) {
  return dispatch_counters()[counter_index(kind, backend)].load(std::memory_order_relaxed);
}

KernelCacheStats kernel_cache_stats() {
#if EST_HAVE_ONEDNN
  return onednn::cache_stats();
#else
  return {};
#endif
}

}  // namespace est::ops
