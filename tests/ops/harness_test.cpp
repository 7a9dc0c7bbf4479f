// Runs every registered OpCase on every (device, backend) target of the kernel registry:
// forward against the reference, reference gradients against finite differences in float64,
// each target's gradients against the reference's in float32. A target this machine cannot run
// (a backend not built, a GPU absent) is reported as skipped; on a GPU, the cases whose op has
// no CUDA kernel yet are listed.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ops/registry.h"
#include "ops/tensor_float_32.h"
#include "tests/ops/harness.h"
#include "tests/skip.h"

namespace est::testing {

int register_op_case(OpCase op_case) {
  const_cast<std::vector<OpCase>&>(op_cases()).push_back(std::move(op_case));
  return 0;
}

const std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

namespace {

using ops::Backend;
using ops::Device;
using ops::DeviceType;
using ops::DType;
using ops::KernelTarget;
using ops::Tensor;

constexpr uint64_t kSeed = 1234;
constexpr KernelTarget kReference{DeviceType::kCPU, Backend::kReference};
// Every target a backend of this project can register; a registry target missing here fails
// "the harness runs on every target the registry has".
constexpr KernelTarget kOneDnn{DeviceType::kCPU, Backend::kOneDnn};
constexpr KernelTarget kCuda{DeviceType::kCUDA, Backend::kCuda};

// Why `target` cannot run here, or "" when it can.
std::string unavailable(KernelTarget target) {
  const auto targets = ops::KernelRegistry::global().targets();
  const std::string name = ops::target_name(target);
  if (std::find(targets.begin(), targets.end(), target) == targets.end())
    return "this build registers no " + name + " kernels";
  if (!ops::backend_available(target.backend))
    return name + " cannot run here: " + ops::backend_unavailable_reason(target.backend);
  return "";
}

// The case's inputs on the target's device (/gpu:0 for a GPU), from the fixed seed.
std::vector<Tensor> inputs_for(const OpCase& c, DType dtype, KernelTarget target = kReference) {
  ops::Generator generator(kSeed);
  std::vector<Tensor> inputs = c.make_inputs(dtype, generator);
  if (target.device == DeviceType::kCUDA)
    for (Tensor& t : inputs) t = t.to(Device::cuda(0));
  return inputs;
}

// Runs fn on `target`: under a BackendGuard for a CPU backend; a GPU's inputs say where.
template <class Fn>
auto on_target(KernelTarget target, Fn fn) {
  std::optional<ops::BackendGuard> guard;
  if (target.device == DeviceType::kCPU) guard.emplace(target.backend);
  return fn();
}

Tensor on_host(const Tensor& t) { return t.defined() ? t.to(Device::cpu()) : t; }

// True for the registry's error for an op without a kernel on the GPU (the cases of such ops
// are listed, not failed: the CUDA backend does not have every op yet).
bool no_gpu_kernel(const UnimplementedError& e) {
  return std::string(e.what()).find("no GPU kernel") != std::string::npos;
}

// Largest |a - b| relative to max(1, max |b|).
double relative_error(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector<double>();
  auto vb = b.to_vector<double>();
  double worst = 0, scale = 1;
  for (double v : vb) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) != std::isnan(vb[i])) return INFINITY;
    worst = std::max(worst, std::fabs(va[i] - vb[i]));
  }
  return worst / scale;
}

// A fixed random weighting of the output turns it into a scalar whose gradient exercises
// every output element differently.
Tensor projection_weights(const Tensor& out) {
  ops::Generator generator(kSeed + 1);
  if (out.dtype() != DType::kBF16)
    return ops::random_uniform(out.shape(), -1.0, 1.0, generator, out.dtype());
  return ops::cast(ops::random_uniform(out.shape(), -1.0, 1.0, generator, DType::kF32),
                   DType::kBF16);
}

Tensor scalar_objective(const OpCase& c, const std::vector<Tensor>& inputs, const Tensor& weights) {
  Tensor out = c.run(inputs);
  if (!ops::is_floating(out.dtype())) return {};
  return ops::sum(ops::mul(out, ops::cast(weights, out.dtype()).to(out.device())));
}

std::vector<Tensor> with_grad(std::vector<Tensor> inputs, const std::vector<int>& which) {
  for (auto& t : inputs) t = t.clone();
  for (int i : which) inputs[static_cast<size_t>(i)].set_requires_grad(true);
  return inputs;
}

std::vector<Tensor> analytic_gradients(const OpCase& c, const std::vector<Tensor>& raw) {
  auto inputs = with_grad(raw, c.differentiable);
  Tensor weights = projection_weights(c.run(inputs));
  Tensor objective = scalar_objective(c, inputs, weights);
  std::vector<Tensor> sources;
  for (int i : c.differentiable) sources.push_back(inputs[static_cast<size_t>(i)]);
  return ops::gradients(objective, sources);
}

// Counts the cases a target ran and lists those whose op has no kernel there.
struct Coverage {
  int ran = 0;
  std::vector<std::string> no_kernel;
  void report(KernelTarget target) const {
    if (target.device != DeviceType::kCUDA) return;  // CPU backends fall back: nothing to list
    MESSAGE(fmt::format("{}: {} cases ran; no kernel yet for {} cases{}{}",
                        ops::target_name(target), ran, no_kernel.size(),
                        no_kernel.empty() ? "" : ": ", fmt::join(no_kernel, ", ")));
  }
};

// 1. Forward, float32: `target` against the reference.
void forward_on(KernelTarget target) {
  REQUIRE(!op_cases().empty());
  Coverage coverage;
  for (const OpCase& c : op_cases()) {
    Tensor reference = on_target(kReference, [&] { return c.run(inputs_for(c, DType::kF32)); });
    Tensor out;
    try {
      out = on_target(target, [&] { return on_host(c.run(inputs_for(c, DType::kF32, target))); });
    } catch (const UnimplementedError& e) {
      if (target.device != DeviceType::kCUDA || !no_gpu_kernel(e)) throw;
      coverage.no_kernel.push_back(c.name);
      continue;
    }
    ++coverage.ran;
    INFO(fmt::format("{} on {}", c.name, ops::target_name(target)));
    REQUIRE(out.shape() == reference.shape());
    REQUIRE(out.dtype() == reference.dtype());
    CHECK(relative_error(out, reference) <= c.forward_tolerance);
  }
  coverage.report(target);
  CHECK(coverage.ran > 0);
}

// 3. Backward, float32: `target`'s gradients against the reference's.
void gradients_on(KernelTarget target) {
  Coverage coverage;
  for (const OpCase& c : op_cases()) {
    if (c.differentiable.empty()) continue;
    std::vector<Tensor> reference =
        on_target(kReference, [&] { return analytic_gradients(c, inputs_for(c, DType::kF32)); });
    std::vector<Tensor> grads;
    try {
      grads = on_target(target, [&] {
        std::vector<Tensor> result = analytic_gradients(c, inputs_for(c, DType::kF32, target));
        for (Tensor& g : result) g = on_host(g);
        return result;
      });
    } catch (const UnimplementedError& e) {
      if (target.device != DeviceType::kCUDA || !no_gpu_kernel(e)) throw;
      coverage.no_kernel.push_back(c.name);
      continue;
    }
    ++coverage.ran;
    for (size_t k = 0; k < grads.size(); ++k) {
      INFO(fmt::format("{} on {}: gradient of input {}", c.name, ops::target_name(target),
                       c.differentiable[k]));
      REQUIRE(grads[k].shape() == reference[k].shape());
      CHECK(relative_error(grads[k], reference[k]) <= c.forward_tolerance);
    }
  }
  coverage.report(target);
  CHECK(coverage.ran > 0);
}

// 4. bfloat16: every case with its floating inputs rounded to bfloat16, run on `target`,
// against the reference in float32 on the same (rounded) values. Each bfloat16 kernel computes
// in float and rounds its output once, so a one-op case is off by at most half a bfloat16 ulp
// (2^-9 relative); cases that chain ops round at each step, hence the bound below. Inputs a
// case makes in a fixed dtype (its float64 and integer variants) stay as they are.
constexpr double kBfloat16Tolerance = 2e-2;

std::vector<Tensor> rounded_inputs(const OpCase& c, DType dtype, KernelTarget target) {
  std::vector<Tensor> inputs = inputs_for(c, DType::kF32);
  for (Tensor& t : inputs) {
    if (t.dtype() == DType::kF32) t = ops::cast(ops::cast(t, DType::kBF16), dtype);
    if (target.device == DeviceType::kCUDA) t = t.to(Device::cuda(0));
  }
  return inputs;
}

Tensor as_float32(const Tensor& t) {
  Tensor host = on_host(t);
  return ops::is_floating(host.dtype()) ? ops::cast(host, DType::kF32) : host;
}

void bfloat16_on(KernelTarget target) {
  Coverage coverage;
  for (const OpCase& c : op_cases()) {
    if (!c.bfloat16) continue;
    Tensor reference =
        on_target(kReference, [&] { return c.run(rounded_inputs(c, DType::kF32, kReference)); });
    Tensor out;
    std::vector<Tensor> grads, reference_grads;
    try {
      out = on_target(target, [&] { return c.run(rounded_inputs(c, DType::kBF16, target)); });
      if (!c.differentiable.empty()) {
        reference_grads = on_target(kReference, [&] {
          return analytic_gradients(c, rounded_inputs(c, DType::kF32, kReference));
        });
        grads = on_target(
            target, [&] { return analytic_gradients(c, rounded_inputs(c, DType::kBF16, target)); });
      }
    } catch (const UnimplementedError& e) {
      if (target.device != DeviceType::kCUDA || !no_gpu_kernel(e)) throw;
      coverage.no_kernel.push_back(c.name);
      continue;
    }
    ++coverage.ran;
    INFO(fmt::format("{} in bfloat16 on {}", c.name, ops::target_name(target)));
    REQUIRE(out.shape() == reference.shape());
    // An output whose dtype follows the inputs (float32 from float32, float64 from float64) is
    // bfloat16.
    const DType from_float64 =
        on_target(kReference, [&] { return c.run(inputs_for(c, DType::kF64)).dtype(); });
    const bool follows_inputs = reference.dtype() == DType::kF32 && from_float64 == DType::kF64;
    if (follows_inputs) CHECK(out.dtype() == DType::kBF16);
    const double tolerance = std::max(c.forward_tolerance, kBfloat16Tolerance);
    CHECK(relative_error(as_float32(out), reference) <= tolerance);
    for (size_t k = 0; k < grads.size(); ++k) {
      INFO(fmt::format("gradient of input {}", c.differentiable[k]));
      REQUIRE(grads[k].shape() == reference_grads[k].shape());
      if (follows_inputs) CHECK(grads[k].dtype() == DType::kBF16);
      CHECK(relative_error(as_float32(grads[k]), reference_grads[k]) <= tolerance);
    }
  }
  coverage.report(target);
  CHECK(coverage.ran > 0);
}

}  // namespace

TEST_CASE("every op in bfloat16 matches float32 within bfloat16 tolerance on cpu/reference") {
  bfloat16_on(kReference);
}

TEST_CASE("every op in bfloat16 matches float32 within bfloat16 tolerance on cpu/onednn") {
  if (const std::string why = unavailable(kOneDnn); !why.empty()) return skip(why);
  bfloat16_on(kOneDnn);
}

TEST_CASE("every op in bfloat16 matches float32 within bfloat16 tolerance on gpu/cuda") {
  if (const std::string why = unavailable(kCuda); !why.empty()) return skip(why);
  ops::enable_tensor_float_32_execution(false);  // float32 tolerances: no TF32 rounding
  bfloat16_on(kCuda);
}

TEST_CASE("harness: the registry's targets are each run by a case below") {
  for (KernelTarget target : ops::KernelRegistry::global().targets()) {
    INFO(ops::target_name(target));
    CHECK((target == kReference || target == kOneDnn || target == kCuda));
  }
}

TEST_CASE("every op matches the reference on cpu/onednn") {
  if (const std::string why = unavailable(kOneDnn); !why.empty()) return skip(why);
  forward_on(kOneDnn);
}

TEST_CASE("every op matches the reference on gpu/cuda") {
  if (const std::string why = unavailable(kCuda); !why.empty()) return skip(why);
  ops::enable_tensor_float_32_execution(false);  // float32 tolerances: no TF32 rounding
  forward_on(kCuda);
}

TEST_CASE("reference gradients match finite differences in float64") {
  for (const OpCase& c : op_cases()) {
    if (c.differentiable.empty()) continue;
    ops::BackendGuard guard(Backend::kReference);
    auto raw = inputs_for(c, DType::kF64);
    auto analytic = analytic_gradients(c, raw);
    Tensor weights = projection_weights(c.run(raw));
    for (size_t k = 0; k < c.differentiable.size(); ++k) {
      size_t index = static_cast<size_t>(c.differentiable[k]);
      Tensor numeric = Tensor::zeros(raw[index].shape(), DType::kF64);
      double h = c.finite_difference_step;
      for (int64_t e = 0; e < raw[index].numel(); ++e) {
        auto plus = raw, minus = raw;
        plus[index] = raw[index].clone();
        minus[index] = raw[index].clone();
        plus[index].data<double>()[e] += h;
        minus[index].data<double>()[e] -= h;
        double f_plus = scalar_objective(c, plus, weights).item();
        double f_minus = scalar_objective(c, minus, weights).item();
        numeric.data<double>()[e] = (f_plus - f_minus) / (2 * h);
      }
      INFO(fmt::format("{}: gradient of input {}", c.name, index));
      CHECK(relative_error(analytic[k], numeric) <= c.gradient_tolerance);
    }
  }
}

TEST_CASE("backend gradients match the reference on cpu/onednn") {
  if (const std::string why = unavailable(kOneDnn); !why.empty()) return skip(why);
  gradients_on(kOneDnn);
}

TEST_CASE("backend gradients match the reference on gpu/cuda") {
  if (const std::string why = unavailable(kCuda); !why.empty()) return skip(why);
  ops::enable_tensor_float_32_execution(false);  // float32 tolerances: no TF32 rounding
  gradients_on(kCuda);
}

}  // namespace est::testing
