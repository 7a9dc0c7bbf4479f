// The optimizers' update step, fused (one registry op per step, nn/optimizer_fused.h) against
// the composite form it replaced (one elementwise op per operation, written out here with ops::),
// on the tutorial CNN's variables (examples/cnn_model.h: 346,634 floats in 6 tensors) times
// --scale. Prints the median time per step of each and their ratio (composite / fused: above 1
// means the fused update is faster), timed in alternating repeats. The fused column is a whole
// Optimizer::apply_gradients (global step, checks, slot lookup), the composite one only the ops.
//
//   optimizer_bench [--threads T] [--repeats R] [--steps S] [--scale K]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <est/nn/nn.h>
#include <est/ops/ops.h>

namespace {

using est::Tensor;
using Clock = std::chrono::steady_clock;
namespace ops = est::ops;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per step of `a` and of `b`, timed in alternating repeats so that both see the
// same load on a shared machine.
template <class A, class B>
std::pair<double, double> seconds_per_step(A a, B b, int steps, int repeats) {
  a();  // warm-up: slots created, caches filled
  b();
  std::vector<double> times_a, times_b;
  auto time = [steps](auto& fn) {
    auto start = Clock::now();
    for (int s = 0; s < steps; ++s) fn();
    return std::chrono::duration<double>(Clock::now() - start).count() / steps;
  };
  for (int r = 0; r < repeats; ++r) {
    times_a.push_back(time(a));
    times_b.push_back(time(b));
  }
  return {median(times_a), median(times_b)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("fused against composite optimizer updates");
  int threads = 2, repeats = 5, steps = 50, scale = 1;
  app.add_option("--threads", threads, "OpenMP threads")->capture_default_str();
  app.add_option("--repeats", repeats, "timed repeats (median)")->capture_default_str();
  app.add_option("--steps", steps, "steps per repeat")->capture_default_str();
  app.add_option("--scale", scale, "variables per CNN variable")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ops::set_num_threads(threads);

  std::vector<ops::Shape> shapes;
  for (int k = 0; k < scale; ++k)
    for (ops::Shape s : {ops::Shape{3, 3, 1, 32}, ops::Shape{32}, ops::Shape{5408, 64},
                         ops::Shape{64}, ops::Shape{64, 10}, ops::Shape{10}})
      shapes.push_back(s);
  ops::Generator generator(1);
  est::nn::VariableStore store;
  std::vector<Tensor> variables, gradients, plain, zeros_a, zeros_b;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor init = ops::random_uniform(shapes[i], -1.0, 1.0, generator, ops::DType::kF32);
    variables.push_back(store.create(fmt::format("v{}", i), init.clone(), true));
    plain.push_back(init.clone());
    gradients.push_back(ops::random_uniform(shapes[i], -1e-3, 1e-3, generator, ops::DType::kF32));
    zeros_a.push_back(Tensor::zeros(shapes[i], ops::DType::kF32));
    zeros_b.push_back(Tensor::zeros(shapes[i], ops::DType::kF32));
  }

  struct Case {
    std::string name;
    est::optim::Optimizer optimizer;
    std::function<void(Tensor&, const Tensor&, Tensor&, Tensor&)> composite;
  };
  const double lr = 1e-3;
  std::vector<Case> cases{
      {"sgd", est::optim::sgd(lr),
       [=](Tensor& v, const Tensor& g, Tensor&, Tensor&) { ops::add_scaled_in_place(v, g, -lr); }},
      {"momentum", est::optim::momentum(lr, 0.9),
       [=](Tensor& v, const Tensor& g, Tensor& a, Tensor&) {
         a.copy_from(ops::add(ops::mul(a, 0.9), g));
         v.copy_from(ops::sub(v, ops::mul(a, lr)));
       }},
      {"adam", est::optim::adam(lr),
       [=](Tensor& v, const Tensor& g, Tensor& m, Tensor& s) {
         m.copy_from(ops::add(ops::mul(m, 0.9), ops::mul(g, 1.0 - 0.9)));
         s.copy_from(ops::add(ops::mul(s, 0.999), ops::mul(ops::square(g), 1.0 - 0.999)));
         v.copy_from(ops::sub(v, ops::div(ops::mul(m, lr), ops::add(ops::sqrt(s), 1e-8))));
       }},
      {"adagrad", est::optim::adagrad(lr),
       [=](Tensor& v, const Tensor& g, Tensor& a, Tensor&) {
         a.copy_from(ops::add(a, ops::square(g)));
         v.copy_from(ops::sub(v, ops::div(ops::mul(g, lr), ops::sqrt(a))));
       }},
      {"rmsprop", est::optim::rmsprop(lr, 0.9, 0.9),
       [=](Tensor& v, const Tensor& g, Tensor& ms, Tensor& mom) {
         ms.copy_from(ops::add(ops::mul(ms, 0.9), ops::mul(ops::square(g), 1.0 - 0.9)));
         mom.copy_from(ops::add(ops::mul(mom, 0.9),
                                ops::div(ops::mul(g, lr), ops::sqrt(ops::add(ms, 1e-10)))));
         v.copy_from(ops::sub(v, mom));
       }},
  };
  est::ops::NoGradGuard no_grad;
  for (Case& c : cases) {
    auto [fused, composite] =
        seconds_per_step([&] { c.optimizer.apply_gradients(store, gradients, variables); },
                         [&] {
                           for (size_t i = 0; i < plain.size(); ++i)
                             c.composite(plain[i], gradients[i], zeros_a[i], zeros_b[i]);
                         },
                         steps, repeats);
    fmt::print(
        "est optimizer={} variables={} threads={} fused_us={:.1f} composite_us={:.1f} "
        "composite_over_fused={:.2f}\n",
        c.name, variables.size(), threads, fused * 1e6, composite * 1e6, composite / fused);
  }
}
