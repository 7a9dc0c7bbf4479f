// The kernel registry's table, the choice of kernel per call, the placement check and log.
#include "ops/registry.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "ops/environment_switch.h"
#include "ops/logging.h"

namespace est::ops {
namespace {

constexpr int kNumTargets = 3;  // cpu/reference, cpu/onednn, gpu/cuda
constexpr KernelTarget kReferenceTarget{DeviceType::kCPU, Backend::kReference};

// The slot of a target in a row of the table, or -1 for a pair that cannot hold kernels.
int target_index(KernelTarget target) {
  if (target.device == DeviceType::kCPU && target.backend == Backend::kReference) return 0;
  if (target.device == DeviceType::kCPU && target.backend == Backend::kOneDnn) return 1;
  if (target.device == DeviceType::kCUDA && target.backend == Backend::kCuda) return 2;
  return -1;
}

constexpr std::array<KernelTarget, kNumTargets> kAllTargets{{
    {DeviceType::kCPU, Backend::kReference},
    {DeviceType::kCPU, Backend::kOneDnn},
    {DeviceType::kCUDA, Backend::kCuda},
}};

std::array<std::atomic<int64_t>, kNumOpIds * kNumTargets>& counters() {
  static std::array<std::atomic<int64_t>, kNumOpIds * kNumTargets> values{};
  return values;
}

bool environment_asks_for_placement() {
  const char* value = std::getenv("EST_LOG_DEVICE_PLACEMENT");
  const std::string text = value == nullptr ? "" : value;
  return text == "1" || text == "true" || text == "TRUE" || text == "True";
}

// Off unless EST_LOG_DEVICE_PLACEMENT asks, read on first use.
EnvironmentSwitch& placement_logging() {
  static EnvironmentSwitch state(environment_asks_for_placement);
  return state;
}

bool placement_logging_on() { return placement_logging().on(); }

void log_placement_once(OpId id, const char* name, Device device, KernelTarget target) {
  static std::mutex mutex;
  static std::set<std::tuple<std::string, int, std::string, int>> logged;
  std::string device_name = device.str();
  {
    std::lock_guard lock(mutex);
    if (!logged.emplace(name, static_cast<int>(id), device_name, static_cast<int>(target.backend))
             .second)
      return;
  }
  log::info("Executing op {} in device {} ({} kernel on {})", name, device_name, op_info(id).name,
            target_name(target));
}

std::string targets_with_kernel(const KernelRegistry& registry, OpId id) {
  std::string names;
  for (KernelTarget target : kAllTargets)
    if (registry.has(id, target)) names += (names.empty() ? "" : ", ") + target_name(target);
  return names.empty() ? "none" : names;
}

[[noreturn]] void no_kernel(OpId id, const char* name, Device device, DType dtype,
                            std::string_view where) {
  const KernelRegistry& registry = KernelRegistry::global();
  throw UnimplementedError(fmt::format(
      "{}: no {} kernel for {} tensors on {} (registry op '{}' has kernels on: {}); run it "
      "where it has one: copy the inputs with tensor.to(device) (ops::copy_to) first",
      name, where, dtype_name(dtype), device.str(), op_info(id).name,
      targets_with_kernel(registry, id)));
}

thread_local KernelObserver* t_kernel_observer = nullptr;  // the active KernelObserverGuard's

}  // namespace

KernelObserverGuard::KernelObserverGuard(KernelObserver& observer) : previous_(t_kernel_observer) {
  t_kernel_observer = &observer;
}
KernelObserverGuard::~KernelObserverGuard() { t_kernel_observer = previous_; }
KernelObserver* kernel_observer() { return t_kernel_observer; }

void report_host_computation(const char* name, const Tensor& output) {
  if (t_kernel_observer != nullptr) t_kernel_observer->host_computed(name, output);
}

namespace {

// op_info's rows, generated from ops/op_list.h (KIND kNone: no OpKind).
constexpr std::array<OpInfo, kNumOpIds> kOpInfos = [] {
  using enum OpKind;
  constexpr std::optional<OpKind> kNone;
  return std::array<OpInfo, kNumOpIds>{{
#define EST_OP_INFO(ID, NAME, KIND, ...) {#NAME, KIND},
      EST_REGISTRY_OPS(EST_OP_INFO)
#undef EST_OP_INFO
  }};
}();

constexpr bool names_are_distinct() {
  for (size_t i = 0; i < kOpInfos.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kOpInfos[i].name == kOpInfos[j].name) return false;
  return true;
}
static_assert(names_are_distinct(), "ops/op_list.h: two ops have one NAME (their kernels' name)");

}  // namespace

OpInfo op_info(OpId id) {
  const auto index = static_cast<size_t>(id);
  return index < kOpInfos.size() ? kOpInfos[index] : OpInfo{"unknown", {}};
}

std::string target_name(KernelTarget target) {
  return fmt::format("{}/{}", target.device == DeviceType::kCPU ? "cpu" : "gpu",
                     backend_name(target.backend));
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* registry = new KernelRegistry();  // leaked: used by static destructors
  return *registry;
}

KernelRegistry::KernelRegistry() : entries_(static_cast<size_t>(kNumOpIds * kNumTargets)) {
  register_reference_kernels(*this);
#if EST_HAVE_ONEDNN
  register_onednn_kernels(*this);
#endif
#if EST_HAVE_CUDA
  register_cuda_kernels(*this);
#endif
  for (int i = 0; i < kNumOpIds; ++i)
    if (!has(static_cast<OpId>(i), kReferenceTarget))
      throw InternalError(fmt::format("kernel registry: op '{}' has no reference kernel",
                                      op_info(static_cast<OpId>(i)).name));
}

size_t KernelRegistry::slot(OpId id, KernelTarget target) {
  const int index = target_index(target);
  if (index < 0) throw InternalError("kernel registry: no such target " + target_name(target));
  return static_cast<size_t>(static_cast<int>(id) * kNumTargets + index);
}

void KernelRegistry::add_erased(OpId id, KernelTarget target, void (*fn)(), DTypes dtypes) {
  Entry& entry = entries_[slot(id, target)];
  if (entry.fn != nullptr)
    throw InternalError(fmt::format("kernel registry: op '{}' registered twice on {}",
                                    op_info(id).name, target_name(target)));
  entry = Entry{fn, dtypes};
}

void (*KernelRegistry::find_erased(OpId id, KernelTarget target, DType dtype) const)() {
  if (target_index(target) < 0) return nullptr;
  const Entry& entry = entries_[slot(id, target)];
  return entry.fn != nullptr && entry.dtypes.contains(dtype) ? entry.fn : nullptr;
}

bool KernelRegistry::has(OpId id, KernelTarget target) const {
  return target_index(target) >= 0 && entries_[slot(id, target)].fn != nullptr;
}

std::vector<KernelTarget> KernelRegistry::targets() const {
  std::vector<KernelTarget> result;
  for (KernelTarget target : kAllTargets)
    for (int i = 0; i < kNumOpIds; ++i)
      if (has(static_cast<OpId>(i), target)) {
        result.push_back(target);
        break;
      }
  return result;
}

Device common_device(std::string_view op, std::initializer_list<const Tensor*> inputs) {
  const Tensor* first = nullptr;
  size_t first_index = 0, index = 0;
  for (const Tensor* t : inputs) {
    if (t != nullptr) {
      if (!t->defined())
        throw InvalidArgumentError(fmt::format("{}: input {} is undefined", op, index));
      if (first == nullptr) {
        first = t;
        first_index = index;
      } else {
        const Device a = first->device(), b = t->device();
        if (a != b && !(a.is_cpu() && b.is_cpu()))
          throw InvalidArgumentError(fmt::format(
              "{}: input {} is on {} but input {} is on {}; an op runs on one device and never "
              "copies between them: move one input with tensor.to(device) (ops::copy_to) first",
              op, first_index, a.str(), index, b.str()));
      }
    }
    ++index;
  }
  if (first == nullptr) throw InvalidArgumentError(fmt::format("{}: got no input tensor", op));
  return first->device();
}

void set_log_device_placement(bool enabled) { placement_logging().set(enabled); }
bool log_device_placement() { return placement_logging_on(); }

bool set_log_device_placement_from_environment() { return placement_logging().reload(); }

int64_t kernel_dispatch_count(OpId id, KernelTarget target) {
  const int index = target_index(target);
  if (index < 0) return 0;
  return counters()[static_cast<size_t>(static_cast<int>(id) * kNumTargets + index)].load(
      std::memory_order_relaxed);
}

namespace detail {

Choice choose(OpId id, const char* name, Device device, DType dtype) {
  if (!device.is_cpu()) return choose_on(id, name, device, Backend::kCuda, dtype);
  const std::optional<OpKind> kind = op_info(id).kind;
  apply_thread_count();
  const std::optional<Backend> forced = forced_cpu_backend();
  const Backend backend = forced ? *forced
                          : kind ? preferred_cpu_backend(*kind)
                                 : Backend::kReference;
  return choose_cpu(id, name, device, dtype, backend);
}

Choice choose_cpu(OpId id, const char* name, Device device, DType dtype, Backend backend) {
  const KernelRegistry& registry = KernelRegistry::global();
  void (*reference)() = registry.find_erased(id, kReferenceTarget, dtype);
  if (reference == nullptr) no_kernel(id, name, device, dtype, "CPU");
  if (backend != Backend::kReference) {
    const KernelTarget target{DeviceType::kCPU, backend};
    if (void (*fn)() = registry.find_erased(id, target, dtype)) return {fn, target, reference};
  }
  return {reference, kReferenceTarget, nullptr};
}

bool calibration_applies(OpId id, Device device, DType dtype) {
  if (!device.is_cpu() || !op_info(id).kind || forced_cpu_backend() ||
      !kernel_calibration_enabled())
    return false;
  const KernelRegistry& registry = KernelRegistry::global();
  return registry.find_erased(id, kReferenceTarget, dtype) != nullptr &&
         registry.find_erased(id, {DeviceType::kCPU, Backend::kOneDnn}, dtype) != nullptr;
}

Backend calibrate(OpId id, const std::string& key, const std::function<double(Backend)>& seconds) {
  apply_thread_count();
  const std::vector<Backend> candidates{Backend::kReference, Backend::kOneDnn};
  return calibrated_backend(KernelChoiceCache::global(), key, candidates,
                            preferred_cpu_backend(*op_info(id).kind),
                            [&](size_t index) { return seconds(candidates[index]); });
}

Choice choose_on(OpId id, const char* name, Device device, Backend backend, DType dtype) {
  const KernelTarget target{device.type, backend};
  void (*fn)() = KernelRegistry::global().find_erased(id, target, dtype);
  if (fn == nullptr)
    no_kernel(id, name, device, dtype, device.is_cpu() ? backend_name(backend) : "GPU");
  if (device.is_cpu()) apply_thread_count();
  return {fn, target, nullptr};
}

void ran(OpId id, const char* name, Device device, KernelTarget target) {
  counters()[static_cast<size_t>(static_cast<int>(id) * kNumTargets + target_index(target))]
      .fetch_add(1, std::memory_order_relaxed);
  if (target.device == DeviceType::kCPU)
    if (const std::optional<OpKind> kind = op_info(id).kind) count_dispatch(*kind, target.backend);
  if (placement_logging_on()) log_placement_once(id, name, device, target);
}

}  // namespace detail

}  // namespace est::ops
