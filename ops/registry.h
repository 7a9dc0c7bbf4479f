// The kernel registry: op x device x backend -> kernel, between the op files and the backends.
//
// Every backend registers its kernels once, when the registry is first used: the reference
// kernels (ops/cpu, every op, every dtype) and, when built, oneDNN (ops/onednn, float32) and
// CUDA (ops/cuda). Registration is explicit (one function per backend, called from
// KernelRegistry::global()) rather than by static initializers, which a linker drops from a
// static library when nothing else in their file is referenced.
//
// An op file calls run_kernel<OpId::kX>(name, device, dtype, args...). The kernel is chosen
//   - on a CPU device: the backend a BackendGuard forces on this thread, else the one the
//     backend table prefers for the op's OpKind; when that backend has no kernel for the op or
//     the dtype, or its kernel throws UnimplementedError, the reference kernel runs instead;
//   - on a GPU: the CUDA kernel, or an UnimplementedError naming the op, the device and where
//     the op has kernels (never a silent trip through host memory).
// run_kernel counts what ran (dispatch_count) and, when device placement logging is on, logs
// one line the first time each (op, device, backend) runs, like TensorFlow's
// tf.debugging.set_log_device_placement(True). Ops whose backward needs state only one
// backend's forward makes (oneDNN's max-pooling workspace) pass the backend that ran forward
// to run_kernel_on for backward; every other backward looks its kernel up afresh.
//
// A KernelObserver (the export tracer, export/trace.h) sees every kernel run_kernel runs on the
// thread that holds its KernelObserverGuard, after it ran, with its arguments. It is a scoped
// execution mode of this thread's ops, like NoGradGuard and BackendGuard: the guard and the
// observer live in one stack frame of the code that traces, and no layer reads another layer's
// state through it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "ops/backend.h"
#include "ops/device.h"
#include "ops/kernel_calibration.h"
#include "ops/kernel_ops.h"

namespace est::ops {

// Where a kernel runs: a device type and a backend on it (cpu/reference, cpu/onednn, gpu/cuda).
struct KernelTarget {
  DeviceType device = DeviceType::kCPU;
  Backend backend = Backend::kReference;
  bool operator==(const KernelTarget&) const = default;
};
std::string target_name(KernelTarget target);  // "cpu/reference", "gpu/cuda"

// A set of dtypes a kernel accepts.
class DTypes {
 public:
  constexpr DTypes(std::initializer_list<DType> dtypes) {
    for (DType d : dtypes) bits_ |= 1u << static_cast<unsigned>(d);
  }
  static constexpr DTypes all() { return DTypes(~0u); }
  constexpr bool contains(DType d) const { return (bits_ >> static_cast<unsigned>(d)) & 1u; }

 private:
  constexpr explicit DTypes(unsigned bits) : bits_(bits) {}
  unsigned bits_ = 0;
};

class KernelRegistry {
 public:
  // The process's registry, with every backend this build has registered.
  static KernelRegistry& global();

  template <OpId id>
  void add(KernelTarget target, KernelFn<id> fn, DTypes dtypes = DTypes::all()) {
    add_erased(id, target, reinterpret_cast<void (*)()>(fn), dtypes);
  }
  // The kernel registered for (op, target) accepting `dtype`, or nullptr.
  template <OpId id>
  KernelFn<id> find(KernelTarget target, DType dtype) const {
    return reinterpret_cast<KernelFn<id>>(find_erased(id, target, dtype));
  }
  // The same without the signature's type (nullptr when none).
  void (*find_erased(OpId id, KernelTarget target, DType dtype) const)();
  bool has(OpId id, KernelTarget target) const;
  // The targets with at least one kernel, cpu/reference first: what the op harness runs on.
  std::vector<KernelTarget> targets() const;

 private:
  KernelRegistry();
  struct Entry {
    void (*fn)() = nullptr;
    DTypes dtypes{};
  };
  void add_erased(OpId id, KernelTarget target, void (*fn)(), DTypes dtypes);
  static size_t slot(OpId id, KernelTarget target);
  std::vector<Entry> entries_;
};

// Each backend's registration (ops/cpu/register.cpp, ops/onednn/register.cpp, ops/cuda/...).
void register_reference_kernels(KernelRegistry& registry);
void register_onednn_kernels(KernelRegistry& registry);
void register_cuda_kernels(KernelRegistry& registry);

// The device an op runs on: that of its defined inputs, which must agree. CPU devices share
// host memory, so /cpu:0 and /cpu:1 mix (the first input's is used); a CPU tensor and a GPU
// tensor, or two GPUs, are an InvalidArgumentError naming the op and both devices. An
// undefined input is an InvalidArgumentError too.
Device common_device(std::string_view op, std::initializer_list<const Tensor*> inputs);

// Device placement logging (TensorFlow's log_device_placement): off unless the environment
// variable EST_LOG_DEVICE_PLACEMENT is 1/true or set_log_device_placement(true) is called. Each
// (op, registry op, device, backend) is logged once per process, at INFO:
//   Executing op add in device /cpu:0 (binary kernel on cpu/reference)
void set_log_device_placement(bool enabled);
bool log_device_placement();
// Re-reads EST_LOG_DEVICE_PLACEMENT (read once on first use otherwise; tests call it again).
bool set_log_device_placement_from_environment();

// Kernels of each registry op run on each target by this process (all threads).
int64_t kernel_dispatch_count(OpId id, KernelTarget target);

// The arguments of op `id`'s kernel as a tuple of its parameter types (references stay
// references): what a KernelObserver receives, type-erased, for that op.
template <class Fn>
struct KernelParameters;
template <class... P>
struct KernelParameters<void (*)(P...)> {
  using Tuple = std::tuple<P...>;
};
template <OpId id>
using KernelArgs = typename KernelParameters<KernelFn<id>>::Tuple;

class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  // Op `id` ran for the user-visible op `name`; `args` points at its KernelArgs<id>, valid
  // during the call only.
  virtual void kernel_ran(OpId id, const char* name, const void* args) = 0;
  // `output` was computed on the host by `name` (a feature column's lookup, a loop over
  // values) instead of by kernels, so an observer that records kernels cannot express it.
  virtual void host_computed(const char* name, const Tensor& output) {
    (void)name;
    (void)output;
  }
};

// Installs `observer` for the kernels run_kernel runs on this thread while the guard lives.
class KernelObserverGuard {
 public:
  explicit KernelObserverGuard(KernelObserver& observer);
  ~KernelObserverGuard();
  KernelObserverGuard(const KernelObserverGuard&) = delete;
  KernelObserverGuard& operator=(const KernelObserverGuard&) = delete;

 private:
  KernelObserver* previous_;
};
KernelObserver* kernel_observer();  // this thread's, or null
// Tells this thread's observer, if any, that `output` was computed on the host by `name`
// ("indicator_column 'color_indicator'"): the export refuses it by that name.
void report_host_computation(const char* name, const Tensor& output);

namespace detail {
template <OpId id, class... Args>
void observe(KernelObserver& observer, const char* name, Args&... args) {
  const KernelArgs<id> tuple(args...);
  observer.kernel_ran(id, name, &tuple);
}

// The kernel run_kernel calls: the chosen target's, the reference as fallback (CPU only).
struct Choice {
  void (*fn)();
  KernelTarget target;
  void (*fallback)();  // the reference kernel when `target` is another CPU backend, else null
};
Choice choose(OpId id, const char* name, Device device, DType dtype);
Choice choose_on(OpId id, const char* name, Device device, Backend backend, DType dtype);
// Counts a kernel that ran and logs its placement (once per op name, device and backend).
void ran(OpId id, const char* name, Device device, KernelTarget target);

// Calibration (ops/kernel_calibration.h): whether this call may be calibrated (a CPU op of a
// kind with kernels for `dtype` on more than one CPU backend, no BackendGuard, calibration on),
// and the choice for `key` among those backends, `seconds(backend)` timing one call on one.
bool calibration_applies(OpId id, Device device, DType dtype);
Backend calibrate(OpId id, const std::string& key, const std::function<double(Backend)>& seconds);
// The kernel of `backend` on the CPU, with the reference as fallback (what choose() gives for
// the table's backend).
Choice choose_cpu(OpId id, const char* name, Device device, DType dtype, Backend backend);

// One argument's bytes (tensors: their elements' bytes; anything else: none) and its part of a
// calibration key: tensor shapes, a window's geometry, matmul dims and scalars; other arguments
// (parameter structs of elementwise ops) add nothing.
template <class T>
int64_t argument_bytes(const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    return value != nullptr ? argument_bytes(*value) : 0;
  } else if constexpr (std::is_same_v<U, Tensor>) {
    return value.defined() ? value.numel() * static_cast<int64_t>(dtype_size(value.dtype())) : 0;
  } else {
    return 0;
  }
}

template <class T>
void add_to_key(std::string& key, const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    if (value != nullptr)
      add_to_key(key, *value);
    else
      key += "null;";
  } else if constexpr (std::is_same_v<U, Tensor>) {
    key += value.defined() ? fmt::format("{};", fmt::join(value.shape(), "x")) : "undefined;";
  } else if constexpr (std::is_same_v<U, cpu::Window2D>) {
    for (int64_t v :
         {value.kernel_h, value.kernel_w, value.stride_h, value.stride_w, value.dilation_h,
          value.dilation_w, value.pad_top, value.pad_left, value.pad_bottom, value.pad_right})
      key += std::to_string(v) + ',';
    key += ';';
  } else if constexpr (std::is_same_v<U, cpu::MatmulDims>) {
    key += fmt::format("{}x{}x{}x{},{}{}{}{};", value.batch, value.m, value.n, value.k,
                       int(value.a_batched), int(value.b_batched), int(value.transpose_a),
                       int(value.transpose_b));
  } else if constexpr (std::is_enum_v<U> || std::is_arithmetic_v<U>) {
    key += fmt::format("{};", static_cast<double>(value));
  }
}

// The choice for this call: choose()'s, or the calibrated one where calibration applies and the
// call's tensors hold at least kCalibrationMinBytes (summed before any key is built, so small
// ops pay a few comparisons). Calibration runs the kernels on the call's own arguments (their
// outputs are written again by the chosen kernel afterwards).
template <OpId id, class... Args>
Choice choose_for_call(const char* name, Device device, DType dtype, Args&... args) {
  if (!calibration_applies(id, device, dtype) ||
      (argument_bytes(args) + ... + int64_t{0}) < kCalibrationMinBytes)
    return choose(id, name, device, dtype);
  std::string key = fmt::format("{} {} ", op_info(id).name, dtype_name(dtype));
  (add_to_key(key, args), ...);
  const Backend backend = calibrate(id, key, [&](Backend candidate) {
    const auto fn = KernelRegistry::global().find<id>({DeviceType::kCPU, candidate}, dtype);
    const auto start = std::chrono::steady_clock::now();
    try {
      fn(args...);
    } catch (const UnimplementedError&) {
      return std::numeric_limits<double>::infinity();  // this backend lacks the case
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  return choose_cpu(id, name, device, dtype, backend);
}

template <OpId id, class... Args>
KernelTarget call(const Choice& choice, const char* name, Device device, Args&... args) {
  if (choice.fallback == nullptr) {
    reinterpret_cast<KernelFn<id>>(choice.fn)(args...);
    ran(id, name, device, choice.target);
    return choice.target;
  }
  try {
    reinterpret_cast<KernelFn<id>>(choice.fn)(args...);
    ran(id, name, device, choice.target);
    return choice.target;
  } catch (const UnimplementedError&) {
    // this backend has no kernel for the case (a shape oneDNN lacks): the reference has all
  }
  reinterpret_cast<KernelFn<id>>(choice.fallback)(args...);
  const KernelTarget reference{DeviceType::kCPU, Backend::kReference};
  ran(id, name, device, reference);
  return reference;
}
}  // namespace detail

// Runs op `id` for the user-visible op `name` on `device` with inputs of `dtype`; returns where
// it ran. Arguments are passed to the kernel as they are (outputs by reference).
template <OpId id, class... Args>
KernelTarget run_kernel(const char* name, Device device, DType dtype, Args&&... args) {
  const KernelTarget target = detail::call<id>(
      detail::choose_for_call<id>(name, device, dtype, args...), name, device, args...);
  if (KernelObserver* observer = kernel_observer()) detail::observe<id>(*observer, name, args...);
  return target;
}

// Like run_kernel, on `backend` exactly (no fallback): the backward of an op whose forward made
// state only that backend reads.
template <OpId id, class... Args>
KernelTarget run_kernel_on(Backend backend, const char* name, Device device, DType dtype,
                           Args&&... args) {
  return detail::call<id>(detail::choose_on(id, name, device, backend, dtype), name, device,
                          args...);
}

}  // namespace est::ops
