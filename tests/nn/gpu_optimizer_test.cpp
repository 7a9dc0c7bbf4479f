// The optimizers on GPU variables: slots created on the variable's GPU, every variable of a step
// updated by one fused launch (gpu/cuda's kApplyAdam ... run once per step), and the values the
// CPU computes for the same steps, within float32 rounding (the GPU kernel repeats the CPU's
// operations with round-to-nearest intrinsics, so they are expected to agree exactly; the
// tolerance is 1e-6 relative). The GPU store is made on /gpu:0 and every case asserts that what
// it updates lives there (a store left on its default /cpu:0 would copy the variables back and
// test the CPU twice). Built everywhere; exits 77 (skipped) where no GPU can run.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "ops/registry.h"

using namespace est;
using namespace est::nn;

namespace {

const ops::Device kGpu = ops::Device::cuda(0);
const std::vector<ops::Shape> kShapes{{100003}, {7, 9}, {}};

double relative_error(const Tensor& a, const Tensor& b) {
  auto va = a.to(ops::Device::cpu()).to_vector<double>();
  auto vb = b.to(ops::Device::cpu()).to_vector<double>();
  double worst = 0, scale = 1;
  for (double v : vb) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::fabs(va[i] - vb[i]));
  return worst / scale;
}

std::string variable_name(size_t i) {
  std::string name = "v";
  name += std::to_string(i);
  return name;
}

}  // namespace

TEST_CASE("optimizers on GPU variables match the CPU, one fused launch per step") {
  struct Rule {
    std::string name;
    std::function<optim::Optimizer()> make;
    ops::OpId op;
    std::vector<std::string> slots;
  };
  const std::vector<Rule> rules{
      {"sgd", [] { return optim::sgd(0.1); }, ops::OpId::kApplySgd, {}},
      {"momentum",
       [] { return optim::momentum(0.1, 0.9, true); },
       ops::OpId::kApplyMomentum,
       {"Momentum"}},
      {"adam", [] { return optim::adam(0.01); }, ops::OpId::kApplyAdam, {"Adam", "Adam_1"}},
      {"adagrad", [] { return optim::adagrad(0.1); }, ops::OpId::kApplyAdagrad, {"Adagrad"}},
      {"rmsprop",
       [] { return optim::rmsprop(0.01, 0.9, 0.5, 1e-6, true); },
       ops::OpId::kApplyRmsprop,
       {"RMSProp", "RMSProp_1", "RMSProp_2"}},
  };
  const ops::KernelTarget cuda{ops::DeviceType::kCUDA, ops::Backend::kCuda};
  for (const Rule& rule : rules) {
    CAPTURE(rule.name);
    ops::Generator generator(11);
    VariableStore cpu_store, gpu_store(kGpu);
    REQUIRE(gpu_store.device() == kGpu);  // a default store keeps its variables on the CPU
    std::vector<Tensor> cpu_vars, gpu_vars;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      Tensor init = ops::random_uniform(kShapes[i], -1.0, 1.0, generator, DType::kF32);
      cpu_vars.push_back(cpu_store.create(variable_name(i), init.clone(), true));
      gpu_vars.push_back(gpu_store.create(variable_name(i), init.to(kGpu), true));
      REQUIRE(gpu_vars.back().device() == kGpu);
    }
    const int64_t before = ops::kernel_dispatch_count(rule.op, cuda);
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> cpu_grads, gpu_grads;
      for (const ops::Shape& shape : kShapes) {
        cpu_grads.push_back(ops::random_uniform(shape, -1.0, 1.0, generator, DType::kF32));
        gpu_grads.push_back(cpu_grads.back().to(kGpu));
      }
      rule.make().apply_gradients(cpu_store, cpu_grads, cpu_vars);
      rule.make().apply_gradients(gpu_store, gpu_grads, gpu_vars);
    }
    CHECK(ops::kernel_dispatch_count(rule.op, cuda) == before + 3);
    for (size_t i = 0; i < kShapes.size(); ++i) {
      CAPTURE(i);
      CHECK(gpu_vars[i].device() == kGpu);
      CHECK(relative_error(gpu_vars[i], cpu_vars[i]) <= 1e-6);
      for (const std::string& slot : rule.slots) {
        CAPTURE(slot);
        const std::string name = variable_name(i) + "/" + slot;
        CHECK(gpu_store.get(name).value.device() == kGpu);
        CHECK(relative_error(gpu_store.get(name).value, cpu_store.get(name).value) <= 1e-6);
      }
    }
  }
}

TEST_CASE("a step of more variables than one launch holds matches the CPU") {
  // 100 variables: three launches of up to 48 (ops/cuda/optimizer_launch.h).
  ops::Generator generator(12);
  const ops::KernelTarget cuda{ops::DeviceType::kCUDA, ops::Backend::kCuda};
  VariableStore cpu_store, gpu_store(kGpu);
  std::vector<Tensor> cpu_vars, gpu_vars;
  for (size_t i = 0; i < 100; ++i) {
    Tensor init = ops::random_uniform({static_cast<int64_t>(i % 7) * 5000 + 3}, -1.0, 1.0,
                                      generator, DType::kF32);
    cpu_vars.push_back(cpu_store.create(variable_name(i), init.clone(), true));
    gpu_vars.push_back(gpu_store.create(variable_name(i), init.to(kGpu), true));
    REQUIRE(gpu_vars.back().device() == kGpu);
  }
  const int64_t before = ops::kernel_dispatch_count(ops::OpId::kApplyAdam, cuda);
  for (int step = 0; step < 2; ++step) {
    std::vector<Tensor> cpu_grads, gpu_grads;
    for (const Tensor& v : cpu_vars) {
      cpu_grads.push_back(ops::random_uniform(v.shape(), -1.0, 1.0, generator, DType::kF32));
      gpu_grads.push_back(cpu_grads.back().to(kGpu));
    }
    optim::adam(0.01).apply_gradients(cpu_store, cpu_grads, cpu_vars);
    optim::adam(0.01).apply_gradients(gpu_store, gpu_grads, gpu_vars);
  }
  CHECK(ops::kernel_dispatch_count(ops::OpId::kApplyAdam, cuda) ==
        before + 2);  // one fused dispatch per step
  for (size_t i = 0; i < cpu_vars.size(); ++i) {
    CAPTURE(i);
    CHECK(gpu_vars[i].device() == kGpu);
    CHECK(relative_error(gpu_vars[i], cpu_vars[i]) <= 1e-6);
  }
}
