// The kernel registry and device placement: every op has a reference kernel, a CPU backend's
// declined case falls back to it, the placement log names each op's device and kernel once,
// ops refuse tensors on two devices (naming both) and ops without a GPU kernel say so, and
// copy_to moves tensors between devices with its gradient. Tensors "on a GPU" come from a
// host-memory allocator registered for /gpu:N, so the checks that come before any kernel run
// on machines without one.
#include <doctest/doctest.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/allocator.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/via_float.h"
#include "ops/logging.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {

constexpr KernelTarget kReference{DeviceType::kCPU, Backend::kReference};
constexpr KernelTarget kOneDnn{DeviceType::kCPU, Backend::kOneDnn};
constexpr KernelTarget kCuda{DeviceType::kCUDA, Backend::kCuda};

// Host memory posing as a GPU's: enough for tensors whose ops fail before any kernel runs.
class HostMemoryAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override { return std::malloc(bytes == 0 ? 1 : bytes); }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  AllocatorStats stats() const override { return {}; }
  void release_cached() override {}
};

Allocator* host_memory(int) {
  static HostMemoryAllocator allocator;
  return &allocator;
}

// Registers host_memory for GPUs for the guard's lifetime.
struct FakeGpuMemory {
  AllocatorFactory previous = register_allocator(DeviceType::kCUDA, host_memory);
  ~FakeGpuMemory() { register_allocator(DeviceType::kCUDA, previous); }
};

// Captures the log's lines for the guard's lifetime.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;
  log::Sink previous = log::set_sink([this](log::Level, std::string_view message) {
    std::lock_guard lock(mutex);
    lines.emplace_back(message);
  });
  ~LogCapture() { log::set_sink(previous); }
  int count(const std::string& part) {
    std::lock_guard lock(mutex);
    int n = 0;
    for (const auto& line : lines) n += contains(line, part) ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("registry: every op has a reference kernel, and the targets are the built backends") {
  const KernelRegistry& registry = KernelRegistry::global();
  for (int i = 0; i < kNumOpIds; ++i) {
    INFO(op_info(static_cast<OpId>(i)).name);
    CHECK(registry.has(static_cast<OpId>(i), kReference));
  }
  const std::vector<KernelTarget> targets = registry.targets();
  REQUIRE(!targets.empty());
  CHECK(targets.front() == kReference);
  auto listed = [&](KernelTarget t) {
    return std::find(targets.begin(), targets.end(), t) != targets.end();
  };
  CHECK(listed(kOneDnn) == backend_built(Backend::kOneDnn));
  CHECK(listed(kCuda) == backend_built(Backend::kCuda));
  CHECK(target_name(kCuda) == "gpu/cuda");
  CHECK(target_name(kOneDnn) == "cpu/onednn");
  // The CUDA backend has the elementwise ops, the reductions and matmul at least.
  if (backend_built(Backend::kCuda))
    for (OpId id : {OpId::kBinary, OpId::kUnary, OpId::kReduce, OpId::kMatmul, OpId::kCopy})
      CHECK(registry.has(id, kCuda));
}

namespace {

// The REFERENCE column of ops/op_list.h, and the reference kernel it says the registry holds.
enum ReferenceDTypes { kNative, kViaFloat, kFloat };
template <OpId id, ReferenceDTypes dtypes, KernelFn<id> kernel>
KernelFn<id> expected_reference() {
  if constexpr (dtypes == kViaFloat) return cpu::via_float<kernel>;
  return kernel;
}

}  // namespace

TEST_CASE("registry: ops/op_list.h gives every op its id, name, CPU kind and reference kernel") {
  const KernelRegistry& registry = KernelRegistry::global();
  int entries = 0;
  using enum OpKind;
  constexpr std::optional<OpKind> kNone;
#define EST_CHECK_OP(ID, NAME, KIND, REFERENCE, ...)                                               \
  {                                                                                                \
    INFO(#NAME);                                                                                   \
    CHECK(static_cast<int>(OpId::ID) == entries++);                                                \
    CHECK(op_info(OpId::ID).name == #NAME);                                                        \
    CHECK(op_info(OpId::ID).kind == std::optional<OpKind>(KIND));                                  \
    CHECK((registry.find<OpId::ID>(kReference, DType::kF32) ==                                     \
           expected_reference<OpId::ID, REFERENCE, cpu::NAME>()));                                 \
    CHECK((registry.find<OpId::ID>(kReference, DType::kI32) != nullptr) == (REFERENCE != kFloat)); \
  }
  EST_REGISTRY_OPS(EST_CHECK_OP)
#undef EST_CHECK_OP
  CHECK(entries == kNumOpIds);
  // The names the placement log and the errors have always used.
  CHECK(op_info(OpId::kOneHot).name == "one_hot");
  CHECK(op_info(OpId::kActivation).name == "activation");
  CHECK(op_info(OpId::kConv2DWeightsFromOutput).kind == OpKind::kConvBackwardWeights);
  CHECK(!op_info(OpId::kGather).kind.has_value());
}

TEST_CASE("registry: a case a CPU backend declines runs on the reference kernel") {
  if (!backend_built(Backend::kOneDnn)) return est::testing::skip("no oneDNN in this build");
  BackendGuard guard(Backend::kOneDnn);
  Generator generator(3);
  const Tensor x = random_uniform({3, 4}, -1, 1, generator);
  auto counts = [] {
    return std::pair{kernel_dispatch_count(OpId::kSoftmax, kReference),
                     kernel_dispatch_count(OpId::kSoftmax, kOneDnn)};
  };
  auto before = counts();
  softmax(x, -1);  // the last axis: oneDNN's
  auto after = counts();
  CHECK(after.first == before.first);
  CHECK(after.second == before.second + 1);
  before = after;
  const Tensor by_rows = softmax(x, 0);  // oneDNN declines another axis
  after = counts();
  CHECK(after.first == before.first + 1);
  CHECK(after.second == before.second);
  CHECK(by_rows.at({0, 1}) + by_rows.at({1, 1}) + by_rows.at({2, 1}) == doctest::Approx(1.0));
  // float64 is not registered for oneDNN: the reference runs without trying it.
  const int64_t matmuls = kernel_dispatch_count(OpId::kMatmul, kReference);
  matmul(Tensor::ones({2, 3}, DType::kF64), Tensor::ones({3, 2}, DType::kF64));
  CHECK(kernel_dispatch_count(OpId::kMatmul, kReference) == matmuls + 1);
}

TEST_CASE("registry: placement logging names each op's device and kernel once") {
  LogCapture capture;
  set_log_device_placement(true);
  const Tensor a = Tensor::ones({2, 2}), b = Tensor::full({2, 2}, 2.0);
  add(a, b);
  add(b, a);
  relu(sub(a, b));
  set_log_device_placement(false);
  add(a, b);
  CHECK(capture.count("Executing op add in device /cpu:0 (binary kernel on cpu/") == 1);
  CHECK(capture.count("Executing op sub in device /cpu:0") == 1);
  CHECK(capture.count("Executing op relu in device /cpu:0 (unary kernel on cpu/") == 1);
  CHECK_FALSE(log_device_placement());

  // EST_LOG_DEVICE_PLACEMENT turns it on.
  const char* saved = std::getenv("EST_LOG_DEVICE_PLACEMENT");
  const std::string saved_value = saved ? saved : "";
  setenv("EST_LOG_DEVICE_PLACEMENT", "1", 1);
  CHECK(set_log_device_placement_from_environment());
  mul(a, b);
  CHECK(capture.count("Executing op mul in device /cpu:0") == 1);
  setenv("EST_LOG_DEVICE_PLACEMENT", "0", 1);
  CHECK_FALSE(set_log_device_placement_from_environment());
  if (saved)
    setenv("EST_LOG_DEVICE_PLACEMENT", saved_value.c_str(), 1);
  else
    unsetenv("EST_LOG_DEVICE_PLACEMENT");
  set_log_device_placement(false);
}

TEST_CASE("placement: an op given tensors on two devices names both and copies nothing") {
  FakeGpuMemory fake;
  const Tensor host = Tensor::ones({2, 3});
  const Tensor gpu0 = Tensor::empty({2, 3}, DType::kF32, Device::cuda(0));
  const Tensor gpu1 = Tensor::empty({2, 3}, DType::kF32, Device::cuda(1));
  CHECK(gpu0.device() == Device::cuda(0));
  const std::string mixed = error_message<InvalidArgumentError>([&] { add(host, gpu0); });
  CHECK(contains(mixed, "add: input 0 is on /cpu:0 but input 1 is on /gpu:0"));
  CHECK(contains(mixed, "tensor.to(device)"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { mul(gpu0, gpu1); }),
                 "mul: input 0 is on /gpu:0 but input 1 is on /gpu:1"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   matmul(host, gpu0.reshape({3, 2}));
                 }),
                 "/gpu:0"));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] {
        linear(host, Tensor::ones({3, 4}), Tensor::empty({4}, DType::kF32, Device::cuda(0)));
      }),
      "linear: input 0 is on /cpu:0 but input 2 is on /gpu:0"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   Tensor target = Tensor::zeros({2, 3});
                   add_scaled_in_place(target, gpu0, 0.1);
                 }),
                 "/gpu:0"));
  // CPU devices share host memory: /cpu:0 and /cpu:1 mix.
  const Tensor other_cpu = copy_to(host, Device::cpu(1));
  CHECK(other_cpu.device() == Device::cpu(1));
  CHECK(add(host, other_cpu).at({1, 2}) == 2.0);
}

TEST_CASE("placement: an op without a GPU kernel for a dtype says where it has kernels") {
  FakeGpuMemory fake;
  // argmax has GPU kernels for the numeric dtypes only (the reference rejects bool itself).
  const Tensor gpu = Tensor::empty({2, 3}, DType::kBool, Device::cuda(0));
  const std::string message = error_message<UnimplementedError>([&] { argmax(gpu, 1); });
  CHECK(contains(message, "argmax: no GPU kernel for bool tensors on /gpu:0"));
  CHECK(contains(message, "'argmax' has kernels on: cpu/reference"));
  CHECK(contains(message, "copy the inputs"));
}

TEST_CASE("copy_to: a copy on another device, whose gradient is copied back") {
  Generator generator(5);
  Tensor x = random_uniform({2, 3}, -1, 1, generator).set_requires_grad(true);
  CHECK(copy_to(x, Device::cpu()).shares_storage(x));  // already there: x itself
  Tensor y = x.to(Device::cpu(1));
  CHECK(y.device() == Device::cpu(1));
  CHECK_FALSE(y.shares_storage(x));
  CHECK(y.to_vector<float>() == x.to_vector<float>());
  backward(sum(mul(y, y)));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == Device::cpu());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(x.grad().at({i, j}) == doctest::Approx(2 * x.at({i, j})));
  Tensor target = Tensor::zeros({2, 3}, DType::kF32, Device::cpu(1));
  target.copy_from(x);
  CHECK(target.to_vector<float>() == x.to_vector<float>());
  CHECK(contains(error_message<InvalidArgumentError>([&] { target.copy_from(Tensor::zeros({3})); }),
                 "does not match"));
}

TEST_CASE("copy_to: a GPU this machine lacks is an error that says why") {
  if (backend_available(Backend::kCuda)) return est::testing::skip("this machine has a GPU");
  const std::string message =
      error_message<FailedPreconditionError>([] { Tensor::ones({2}).to(Device::cuda(0)); });
  CHECK(contains(message, "/gpu:0"));
  CHECK(contains(message, backend_built(Backend::kCuda) ? "sees no GPU" : "no CUDA backend"));
}
