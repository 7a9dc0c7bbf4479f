// The optimizers' fused updates (one registry op per step) against the composite form they
// replaced (one elementwise op per operation, written out here with ops::): bit for bit on the
// CPU, in float32 and float64, over three steps, with a variable large enough to be split
// across threads, a scalar and an empty one. Also: the fused op is what ran.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "ops/registry.h"

using namespace est;
using namespace est::nn;

namespace {

using ops::OpId;

const std::vector<ops::Shape> kShapes{{70001}, {}, {3, 5}, {0}};

// The former composite update of one variable, given its slots (created by the caller).
using Composite = std::function<void(Tensor& var, const Tensor& g, std::vector<Tensor>& slots,
                                     double lr, int64_t step)>;

struct Rule {
  std::string name;
  std::function<optim::Optimizer()> make;
  OpId op;
  std::vector<std::pair<std::string, double>> slots;  // name, initial value
  Composite composite;
};

std::vector<Rule> rules() {
  const double lr = 0.05;
  std::vector<Rule> out;
  out.push_back({"sgd",
                 [=] { return optim::sgd(lr); },
                 OpId::kApplySgd,
                 {},
                 [](Tensor& var, const Tensor& g, std::vector<Tensor>&, double rate, int64_t) {
                   ops::add_scaled_in_place(var, g, -rate);
                 }});
  for (bool nesterov : {false, true})
    out.push_back({nesterov ? "nesterov" : "momentum",
                   [=] { return optim::momentum(lr, 0.9, nesterov); },
                   OpId::kApplyMomentum,
                   {{"Momentum", 0.0}},
                   [=](Tensor& var, const Tensor& g, std::vector<Tensor>& s, double rate, int64_t) {
                     s[0].copy_from(ops::add(ops::mul(s[0], 0.9), g));
                     Tensor step = nesterov
                                       ? ops::add(ops::mul(g, rate), ops::mul(s[0], rate * 0.9))
                                       : ops::mul(s[0], rate);
                     var.copy_from(ops::sub(var, step));
                   }});
  out.push_back(
      {"adam",
       [=] { return optim::adam(lr, 0.8, 0.95, 1e-3); },
       OpId::kApplyAdam,
       {{"Adam", 0.0}, {"Adam_1", 0.0}},
       [](Tensor& var, const Tensor& g, std::vector<Tensor>& s, double rate, int64_t step) {
         // beta powers as the optimizer holds them: float variables multiplied each step
         Tensor b1 = Tensor::full({}, 0.8, var.dtype()), b2 = Tensor::full({}, 0.95, var.dtype());
         for (int64_t i = 0; i < step; ++i) {
           b1.fill(b1.item() * 0.8);
           b2.fill(b2.item() * 0.95);
         }
         double step_size = rate * std::sqrt(1.0 - b2.item()) / (1.0 - b1.item());
         s[0].copy_from(ops::add(ops::mul(s[0], 0.8), ops::mul(g, 1.0 - 0.8)));
         s[1].copy_from(ops::add(ops::mul(s[1], 0.95), ops::mul(ops::square(g), 1.0 - 0.95)));
         Tensor update = ops::div(ops::mul(s[0], step_size), ops::add(ops::sqrt(s[1]), 1e-3));
         var.copy_from(ops::sub(var, update));
       }});
  out.push_back({"adagrad",
                 [=] { return optim::adagrad(lr, 0.1); },
                 OpId::kApplyAdagrad,
                 {{"Adagrad", 0.1}},
                 [](Tensor& var, const Tensor& g, std::vector<Tensor>& s, double rate, int64_t) {
                   s[0].copy_from(ops::add(s[0], ops::square(g)));
                   var.copy_from(ops::sub(var, ops::div(ops::mul(g, rate), ops::sqrt(s[0]))));
                 }});
  for (bool centered : {false, true})
    out.push_back(
        {centered ? "rmsprop_centered" : "rmsprop",
         [=] { return optim::rmsprop(lr, 0.9, 0.5, 1e-6, centered); }, OpId::kApplyRmsprop,
         centered
             ? std::vector<std::pair<std::string, double>>{{"RMSProp", 1.0},
                                                           {"RMSProp_1", 0.0},
                                                           {"RMSProp_2", 0.0}}
             : std::vector<std::pair<std::string, double>>{{"RMSProp", 1.0}, {"RMSProp_1", 0.0}},
         [=](Tensor& var, const Tensor& g, std::vector<Tensor>& s, double rate, int64_t) {
           Tensor& ms = s[0];
           Tensor& mom = centered ? s[2] : s[1];
           ms.copy_from(ops::add(ops::mul(ms, 0.9), ops::mul(ops::square(g), 1.0 - 0.9)));
           Tensor denominator = ms;
           if (centered) {
             s[1].copy_from(ops::add(ops::mul(s[1], 0.9), ops::mul(g, 1.0 - 0.9)));
             denominator = ops::sub(ms, ops::square(s[1]));
           }
           Tensor scaled = ops::div(ops::mul(g, rate), ops::sqrt(ops::add(denominator, 1e-6)));
           mom.copy_from(ops::add(ops::mul(mom, 0.5), scaled));
           var.copy_from(ops::sub(var, mom));
         }});
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::string variable_name(size_t i) {
  std::string name = "v";
  name += std::to_string(i);
  return name;
}

}  // namespace

TEST_CASE("fused optimizer updates give the composite ops' bits on the CPU") {
  for (const Rule& rule : rules()) {
    for (ops::DType dtype : {ops::DType::kF32, ops::DType::kF64}) {
      CAPTURE(rule.name);
      CAPTURE(ops::dtype_name(dtype));
      ops::Generator generator(7);
      VariableStore store;
      std::vector<Tensor> fused, reference;
      std::vector<std::vector<Tensor>> reference_slots;
      for (size_t i = 0; i < kShapes.size(); ++i) {
        Tensor init = ops::random_uniform(kShapes[i], -1.0, 1.0, generator, dtype);
        fused.push_back(store.create(variable_name(i), init.clone(), true));
        reference.push_back(init.clone());
        std::vector<Tensor> slots;
        for (const auto& [name, initial] : rule.slots)
          slots.push_back(Tensor::full(kShapes[i], initial, dtype));
        reference_slots.push_back(slots);
      }
      const int64_t before = ops::kernel_dispatch_count(rule.op, {});
      for (int64_t step = 0; step < 3; ++step) {
        std::vector<Tensor> gradients;
        for (const ops::Shape& shape : kShapes)
          gradients.push_back(ops::random_uniform(shape, -2.0, 2.0, generator, dtype));
        rule.make().apply_gradients(store, gradients, fused);
        ops::NoGradGuard no_grad;
        for (size_t i = 0; i < kShapes.size(); ++i)
          rule.composite(reference[i], gradients[i], reference_slots[i], 0.05, step);
      }
      CHECK(ops::kernel_dispatch_count(rule.op, {}) == before + 3);
      for (size_t i = 0; i < kShapes.size(); ++i) {
        CAPTURE(i);
        CHECK(same_bits(fused[i], reference[i]));
        for (size_t s = 0; s < rule.slots.size(); ++s) {
          CAPTURE(rule.slots[s].first);
          CHECK(same_bits(store.get(variable_name(i) + "/" + rule.slots[s].first).value,
                          reference_slots[i][s]));
        }
      }
    }
  }
}

TEST_CASE("a step whose variables differ in dtype runs the composite update") {
  VariableStore store;
  Tensor a = store.create("a", Tensor::from_vector<float>({1, 2}), true);
  Tensor b = store.create("b", Tensor::from_vector<double>({1, 2}), true);
  const int64_t before = ops::kernel_dispatch_count(OpId::kApplyAdam, {});
  optim::adam(0.1).apply_gradients(
      store, {Tensor::from_vector<float>({1, -1}), Tensor::from_vector<double>({1, -1})}, {a, b});
  CHECK(ops::kernel_dispatch_count(OpId::kApplyAdam, {}) == before);
  CHECK(a.at({0}) == doctest::Approx(0.9).epsilon(1e-5));
  CHECK(b.at({1}) == doctest::Approx(2.1).epsilon(1e-4));
}
