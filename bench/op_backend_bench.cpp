// oneDNN against the reference (Eigen) kernels, op kind by op kind, at the shapes of the
// tutorial CNN (examples/cnn_model.h: conv2d 3x3 32 relu on [B, 28, 28, 1], max pool 2, dense
// 5408 -> 64 relu, dense 64 -> 10, softmax cross entropy, SGD), forward and backward, each
// against this machine's roofline measured in the same run (bench/roofline.h); then the whole
// training step on each backend, on the static per-kind table (ops/backend_table.h) and on the
// choice calibrated in this process (ops/kernel_calibration.h).
//
// Each measurement is the time of a few calls; the two backends take turns round by round and
// a row reports the median per-call time of each and the median of the per-round ratios with
// its range, so a busy neighbour slows both sides of a ratio alike. Backward rows time only
// the backward pass (forward runs untimed before each call).
//
// Roofline columns: `flops` and `bytes` are the op's work at this batch (2 FLOPs per
// multiply-add, one per element for comparisons and elementwise ops; bytes: each tensor the op
// must read or write, once, float32, as if no cache held anything between ops), `bound_us` is
// max(flops / sgemm rate, bytes / triad bandwidth), and `roofline_fraction` is bound_us over the
// faster backend's time: 1 is the machine's limit. Rows with `in_step=1` are what the tutorial's
// training step runs (the step fuses the convolution's bias and relu into it and into its weight
// gradient, and the dense layers' bias and relu likewise; relu and bias_add rows show those ops
// alone, at the convolution's output shape).
//
//   op_backend_bench [--batch B] [--rounds R] [--threads T]
// Lines: `est roofline threads=T gemm=... sgemm_gflops=G triad_gb_per_s=B`, then per row `op=<row>
// kind=<op kind> reference_us=<t> onednn_us=<t> onednn_over_reference=<median> range=<lo>..<hi>
// faster=<backend> table=<backend> in_step=<0|1> flops=<F> bytes=<B> bound_us=<t>
// roofline_fraction=<f>`, then `step backend=<b> ms=<t> examples_per_sec=<r> roofline_fraction=<f>`
// for reference, onednn, table and calibrated, and `step table_over_onednn=<median per-round
// ratio>` and `step calibrated_over_table=...`.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <est/ops/ops.h>

#include "bench/cnn_step.h"
#include "bench/roofline.h"
#include "ops/kernel_calibration.h"
#include "ops/registry.h"

namespace {

using est::Tensor;
using est::ops::Backend;
using est::ops::OpKind;
using Clock = std::chrono::steady_clock;

struct Work {
  double flops = 0, bytes = 0;
  bool in_step = false;  // the tutorial's training step runs this op
};

struct Case {
  std::string name;
  std::optional<OpKind> kind;     // none: no oneDNN kernel (reference only)
  std::function<Tensor()> setup;  // untimed: builds what `timed` consumes
  std::function<void(Tensor&)> timed;
  Work work;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds per call of `c` over `calls` calls.
double time_calls(const Case& c, int calls) {
  double total = 0;
  for (int i = 0; i < calls; ++i) {
    Tensor state = c.setup();
    auto start = Clock::now();
    c.timed(state);
    total += bench::seconds_since(start);
  }
  return total / calls;
}

// Enough calls for about 20 ms.
int calibrate(const Case& c) {
  time_calls(c, 2);  // warm-up: primitives, allocator
  const double once = std::max(1e-6, time_calls(c, 3));
  return std::clamp(static_cast<int>(0.02 / once), 3, 2000);
}

void backward_of(Tensor& out) { est::ops::backward(out, Tensor::ones(out.shape())); }

std::vector<Case> cases(int64_t batch) {
  using namespace est::ops;
  Generator generator(1);
  auto random = [&](est::Shape shape) { return random_uniform(shape, -1, 1, generator); };
  auto param = [&](est::Shape shape) { return random(shape).set_requires_grad(true); };
  Tensor images = random_uniform({batch, 28, 28, 1}, 0, 1, generator);
  Tensor images_grad = images.clone().set_requires_grad(true);
  Tensor conv_kernel = param({3, 3, 1, 32}), conv_bias = param({32});
  Tensor conv_out = random({batch, 26, 26, 32});  // the conv's output, input to pooling
  Tensor conv_out_grad = conv_out.clone().set_requires_grad(true);
  // A second conv layer's shapes (32 -> 64 channels on the pooled 13x13 maps), for the
  // backward-data kernel, which the tutorial's first layer never runs.
  Tensor pooled = random({batch, 13, 13, 32}).set_requires_grad(true);
  Tensor conv2_kernel = random({3, 3, 32, 64});
  Tensor flat = random({batch, 5408}).set_requires_grad(true);
  Tensor dense1 = param({5408, 64}), dense1_bias = param({64});
  Tensor hidden = random({batch, 64}).set_requires_grad(true);
  Tensor dense2 = param({64, 10}), dense2_bias = param({10});
  Tensor logits = random({batch, 10}).set_requires_grad(true);
  Tensor gamma = param({32}), beta = param({32});
  Conv2DParams relu_conv{.activation = Activation::kRelu};
  auto none = [] { return Tensor(); };
  auto forward_only = [](std::function<Tensor()> f) { return [f](Tensor&) { (void)f(); }; };

  auto conv = [=] { return conv2d(images, conv_kernel, conv_bias, relu_conv); };
  auto conv_data = [=] { return conv2d(images_grad, conv_kernel.detach(), Tensor(), relu_conv); };
  auto conv2_data = [=] { return conv2d(pooled, conv2_kernel, Tensor(), relu_conv); };
  auto conv_inner = [=] { return conv2d(images_grad, conv_kernel, conv_bias, relu_conv); };
  auto pool = [=] { return max_pool2d(conv_out_grad, {}); };
  auto linear1 = [=] { return linear(flat, dense1, dense1_bias, Activation::kRelu); };
  auto linear2 = [=] { return linear(hidden, dense2, dense2_bias, Activation::kNone); };
  auto relu_op = [=] { return relu(conv_out_grad); };
  auto softmax_op = [=] { return log_softmax(logits, -1); };
  auto bias = [=] { return bias_add(conv_out_grad, conv_bias); };
  auto norm = [=] { return batch_norm_training(conv_out_grad, gamma, beta, 1e-3).output; };

  // The SGD update of the step's six variables, in place.
  std::vector<Tensor> variables{conv_kernel.detach(), conv_bias.detach(), dense1.detach(),
                                dense1_bias.detach(), dense2.detach(),    dense2_bias.detach()};
  std::vector<Tensor> gradients;
  for (const Tensor& v : variables) gradients.push_back(random(v.shape()));
  auto sgd_update = [variables, gradients](Tensor&) mutable {
    run_kernel<OpId::kApplySgd>("apply_sgd", est::Device::cpu(), est::DType::kF32, variables,
                                gradients, 1e-6);
  };
  Tensor labels = cast(random_uniform({batch}, 0, 10, generator), est::DType::kI64);
  auto cross_entropy = [=] { return sparse_softmax_cross_entropy_with_logits(labels, logits); };

  // Work per op (see the header comment): N images; sizes in floats.
  const double n = static_cast<double>(batch), image = 28 * 28, conv_map = 26 * 26 * 32,
               pooled_map = 13 * 13 * 32, conv2_map = 11 * 11 * 64, patch = 9;
  const double conv_macs = n * conv_map * patch, dense1_macs = n * 5408 * 64,
               dense2_macs = n * 64 * 10, parameters = 347146;
  auto work = [](double flops, double floats, bool in_step) {
    return Work{flops, 4 * floats, in_step};
  };
  return {
      {"conv_forward", OpKind::kConvForward, none, forward_only(conv),
       work(2 * conv_macs, n * (image + conv_map) + 320, true)},
      {"conv_backward_weights(first layer)", OpKind::kConvBackwardWeights, conv, backward_of,
       work(2 * conv_macs, n * (image + 2 * conv_map) + 320, true)},
      {"conv_backward_data_and_weights", OpKind::kConvBackwardWeights, conv_inner, backward_of,
       work(4 * conv_macs, n * (2 * image + 2 * conv_map) + 640, false)},
      {"conv_backward_data", OpKind::kConvBackwardData, conv_data, backward_of,
       work(2 * conv_macs, n * (image + 2 * conv_map) + 288, false)},
      {"conv_backward_data(second layer 32->64 13x13)", OpKind::kConvBackwardData, conv2_data,
       backward_of, work(2 * n * conv2_map * 288, n * (pooled_map + 2 * conv2_map) + 18432, false)},
      {"max_pool_forward", OpKind::kPooling, none, forward_only(pool),
       work(n * conv_map, n * (conv_map + pooled_map), true)},
      {"max_pool_backward", OpKind::kPooling, pool, backward_of,
       work(n * conv_map, n * (2 * conv_map + pooled_map), true)},
      {"dense1_forward(5408x64 relu)", OpKind::kMatmul, none, forward_only(linear1),
       work(2 * dense1_macs, n * (5408 + 64) + 5408 * 64 + 64, true)},
      {"dense1_backward", OpKind::kMatmul, linear1, backward_of,
       work(4 * dense1_macs, n * (2 * 64 + 2 * 5408) + 2 * (5408 * 64 + 64), true)},
      {"dense2_forward(64x10)", OpKind::kMatmul, none, forward_only(linear2),
       work(2 * dense2_macs, n * (64 + 10) + 650, true)},
      {"dense2_backward", OpKind::kMatmul, linear2, backward_of,
       work(4 * dense2_macs, n * (2 * 10 + 2 * 64) + 2 * 650, true)},
      {"relu_forward", OpKind::kEltwise, none, forward_only(relu_op),
       work(n * conv_map, 2 * n * conv_map, false)},
      {"relu_backward", OpKind::kEltwise, relu_op, backward_of,
       work(n * conv_map, 3 * n * conv_map, false)},
      {"log_softmax_forward", OpKind::kSoftmax, none, forward_only(softmax_op),
       work(5 * n * 10, 2 * n * 10, false)},
      {"log_softmax_backward", OpKind::kSoftmax, softmax_op, backward_of,
       work(3 * n * 10, 3 * n * 10, false)},
      {"sparse_cross_entropy_forward", std::nullopt, none, forward_only(cross_entropy),
       work(5 * n * 10, 2 * n * 10 + 2 * n, true)},
      {"sparse_cross_entropy_backward", std::nullopt, cross_entropy, backward_of,
       work(2 * n * 10, 2 * n * 10 + 2 * n, true)},
      {"bias_add_forward", std::nullopt, none, forward_only(bias),
       work(n * conv_map, 2 * n * conv_map + 32, false)},
      {"bias_add_backward", std::nullopt, bias, backward_of,
       work(n * conv_map, n * conv_map + 32, false)},
      {"sgd_update", std::nullopt, none, sgd_update, work(2 * parameters, 3 * parameters, true)},
      {"batch_norm_forward", OpKind::kBatchNorm, none, forward_only(norm),
       work(5 * n * conv_map, 3 * n * conv_map, false)},
      {"batch_norm_backward", OpKind::kBatchNorm, norm, backward_of,
       work(8 * n * conv_map, 4 * n * conv_map, false)},
  };
}

// " in_step=<0|1> flops=<F> bytes=<B> bound_us=<t> roofline_fraction=<f>" for a row timed at
// `seconds` per call.
std::string roofline_columns(const bench::Roofline& roofline, const Work& work, double seconds) {
  const bench::StepCost cost{work.flops, work.bytes};
  const double fraction = bench::roofline_fraction(roofline, cost, seconds);
  return fmt::format(
      " in_step={} flops={:.4g} bytes={:.4g} bound_us={:.1f} roofline_fraction={:.3f}",
      work.in_step ? 1 : 0, work.flops, work.bytes, 1e6 * fraction * seconds, fraction);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64;
  int rounds = 11, threads = 0;
  CLI::App app(
      "oneDNN against the reference kernels per op kind at the tutorial CNN's shapes, "
      "and the training step on each backend and on the per-kind table.",
      "op_backend_bench");
  app.add_option("--batch", batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds the backends take turns (medians reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "OpenMP threads (default: the configured count)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) est::ops::set_num_threads(threads);
  if (!est::ops::backend_available(Backend::kOneDnn)) {
    fmt::print("op_backend_bench: this build has no oneDNN; nothing to compare\n");
    return 0;
  }
  fmt::print("batch={} threads={} rounds={}\n", batch, est::ops::num_threads(), rounds);
  const bench::Roofline roofline = bench::measure_roofline(est::ops::num_threads());
  fmt::print("est roofline threads={} gemm={} sgemm_gflops={:.1f} triad_gb_per_s={:.1f}\n",
             est::ops::num_threads(), roofline.gemm, roofline.gflops, roofline.gbytes_s);

  for (const Case& c : cases(batch)) {
    const std::vector<Backend> backends =
        c.kind ? std::vector<Backend>{Backend::kReference, Backend::kOneDnn}
               : std::vector<Backend>{Backend::kReference};
    std::vector<int> calls;
    for (Backend backend : backends) {
      est::ops::BackendGuard guard(backend);
      calls.push_back(calibrate(c));
    }
    std::vector<std::vector<double>> times(backends.size());
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r) {
      for (size_t b = 0; b < backends.size(); ++b) {
        est::ops::BackendGuard guard(backends[b]);
        times[b].push_back(time_calls(c, calls[b]));
      }
      if (c.kind) ratios.push_back(times[1].back() / times[0].back());
    }
    if (!c.kind) {
      fmt::print("op={} kind=none reference_us={:.1f} onednn_us=none{}\n", c.name,
                 1e6 * median(times[0]), roofline_columns(roofline, c.work, median(times[0])));
      continue;
    }
    const double ratio = median(ratios);
    fmt::print(
        "op={} kind={} reference_us={:.1f} onednn_us={:.1f} onednn_over_reference={:.2f} "
        "range={:.2f}..{:.2f} faster={} table={}{}\n",
        c.name, est::ops::op_kind_name(*c.kind), 1e6 * median(times[0]), 1e6 * median(times[1]),
        ratio, *std::min_element(ratios.begin(), ratios.end()),
        *std::max_element(ratios.begin(), ratios.end()), ratio < 1 ? "onednn" : "reference",
        est::ops::backend_name(est::ops::preferred_cpu_backend(*c.kind)),
        roofline_columns(roofline, c.work, std::min(median(times[0]), median(times[1]))));
  }

  // The whole step: everything on one backend, then the table's choice per kind (calibration
  // off), then the choice calibrated in this process (made during the warm-up steps).
  struct Configuration {
    const char* name;
    std::optional<Backend> backend;
    bool calibrated;
  };
  const std::vector<Configuration> configurations{{"reference", Backend::kReference, false},
                                                  {"onednn", Backend::kOneDnn, false},
                                                  {"table", std::nullopt, false},
                                                  {"calibrated", std::nullopt, true}};
  std::vector<std::unique_ptr<bench::CnnStep>> steps;
  for (size_t i = 0; i < configurations.size(); ++i)
    steps.push_back(std::make_unique<bench::CnnStep>(batch));
  auto run = [&](size_t i, int count) {
    std::optional<est::ops::BackendGuard> guard;
    if (configurations[i].backend) guard.emplace(*configurations[i].backend);
    est::ops::set_kernel_calibration(configurations[i].calibrated);
    for (int s = 0; s < count; ++s) steps[i]->step();
  };
  std::vector<std::vector<double>> step_times(configurations.size());
  for (size_t i = 0; i < configurations.size(); ++i) run(i, 5);  // warm-up (and calibration)
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < configurations.size(); ++i) {
      auto start = Clock::now();
      run(i, 5);
      step_times[i].push_back(bench::seconds_since(start) / 5);
    }
  const bench::StepCost step_cost = bench::tutorial_cnn_cost(batch, true);
  for (size_t i = 0; i < configurations.size(); ++i)
    fmt::print(
        "step backend={} batch={} ms={:.2f} examples_per_sec={:.0f} roofline_fraction={:.3f}\n",
        configurations[i].name, batch, 1e3 * median(step_times[i]), batch / median(step_times[i]),
        bench::roofline_fraction(roofline, step_cost, median(step_times[i])));
  auto ratio_line = [&](const char* name, size_t numerator, size_t denominator) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r)
      ratios.push_back(step_times[numerator][static_cast<size_t>(r)] /
                       step_times[denominator][static_cast<size_t>(r)]);
    fmt::print("step {}={:.2f} range={:.2f}..{:.2f}\n", name, median(ratios),
               *std::min_element(ratios.begin(), ratios.end()),
               *std::max_element(ratios.begin(), ratios.end()));
  };
  ratio_line("table_over_onednn", 2, 1);
  ratio_line("calibrated_over_table", 3, 2);
  return 0;
}
