// Training steps/s and examples/s of est on one device (an H100 in issue 13's suite, the CPU for
// the smoke test), the est half of bench/gpu_bench.sh (bench/torch_gpu.py is the PyTorch half):
// the tutorial CNN (examples/cnn_model.h) at each --cnn-batches size, eagerly and as a CUDA graph
// (nn::CapturedStep: the launch-bound small-batch case), and the ResNet-style net of
// bench/resnet_model.h at --resnet-batch. Data are synthetic batches already on the device (a
// ring of 8, so both sides time the step, not the input pipeline); SGD, sparse softmax
// cross-entropy. Timing is steady-state: --warmup steps, then --repeats runs of --steps steps
// with the device synchronised at the ends only; the median run is printed. The variables are
// created on the CPU (the same initial values everywhere) and copied once into a store on the
// device, which every row checks.
//
// Precision, for a fair comparison with PyTorch (bench/torch_gpu.py prints the same rows): the
// CNN runs at each --precisions entry, `float32` with TensorFloat-32 off (plain float32 FMA
// math in cuBLAS and cuDNN: ops::enable_tensor_float_32_execution(false)) and `tf32` with it on
// (TensorFlow's default on Ampere and later; a GPU mode, skipped on the CPU). The ResNet runs
// under --resnet-policy: mixed_bfloat16 (nn/mixed_precision.h) keeps TF32 on, as TensorFlow
// would, float32 turns it off; its line says how its convolutions compute (`convs=`): this
// build's CUDA convolutions have no native bfloat16 path (ops/cuda/register.cpp runs them in
// float32 through casts), so a mixed_bfloat16 row says `convs=tf32_via_casts`, not bfloat16.
//
//   gpu_bench [--device gpu|cpu] [--warmup W] [--steps S] [--repeats R] [--cnn-batches 64,1024]
//             [--precisions float32,tf32] [--resnet-batch 256] [--resnet-size 32]
//             [--resnet-width 64] [--resnet-blocks 3] [--resnet-policy mixed_bfloat16|float32]
// Lines: `est train model=<cnn|resnet> batch=<B> mode=<eager|graph> precision=<p> [convs=<c>]
// steps_per_sec=<x> examples_per_sec=<y> loss=<last>`, or the same key with `error="..."` or
// `skipped="..."` in place of the figures; `est device=...` and `est precision ...` lines first.
// mode=graph is nn::CapturedStep; on the CPU it has no graph to capture, and the line is a skip,
// but its eager path still runs a few training steps and the line is an error if they did not
// train (so the CPU smoke test exercises the captured step's code, issue 22).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <est/nn/nn.h>
#include <est/ops/ops.h>
#include <est/ops/tensor_float_32.h>
#if EST_HAVE_CUDA
#include <est/ops/cuda/runtime.h>
#endif

#include "bench/resnet_model.h"
#include "examples/cnn_model.h"

namespace {

using est::Device;
using est::Tensor;
using Clock = std::chrono::steady_clock;
using ModelFn = std::function<Tensor(est::ModelContext&, const Tensor&)>;

constexpr int kRing = 8;  // distinct batches cycled through

void synchronize(Device device) {
#if EST_HAVE_CUDA
  if (device.is_cuda()) est::ops::cuda::synchronize(device.index);
#else
  (void)device;
#endif
}

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '"', '\'');
  return text;
}

// A model trained by SGD on a ring of synthetic batches held on `device`, its variables in a
// store on `device`.
struct Trainer {
  Device device;
  ModelFn model;
  est::nn::VariableStore store{device};
  est::ModelContext ctx{store, est::nn::Mode::kTrain, 7};
  std::vector<Tensor> images, labels;
  Tensor loss;

  Trainer(Device on, ModelFn fn, const est::Shape& image_shape) : device(on), model(std::move(fn)) {
    est::ops::Generator generator(3);
    for (int i = 0; i < kRing; ++i) {
      images.push_back(est::ops::random_uniform(image_shape, 0, 1, generator).to(device));
      labels.push_back(est::ops::cast(est::ops::random_uniform({image_shape[0]}, 0, 10, generator),
                                      est::DType::kI64)
                           .to(device));
    }
    // Variables: created on the CPU by one call on one example, then copied to the device.
    est::nn::VariableStore host_store;
    est::ModelContext host_ctx{host_store, est::nn::Mode::kTrain, 7};
    est::Shape one = image_shape;
    one[0] = 1;
    host_ctx.begin_call();
    model(host_ctx, Tensor::zeros(one));
    for (const est::nn::Variable& v : host_store.variables()) {
      const Tensor value = store.create(v.name, v.value.detach().to(device), v.trainable);
      if (est::ops::is_floating(value.dtype()) && value.device() != device)
        throw est::InternalError(
            fmt::format("variable {} is on {}, not on {}: the store of a {} "
                        "run must live there",
                        v.name, value.device().str(), device.str(), device.str()));
    }
  }

  // The first trainable variable's values, on the host (to see whether steps trained).
  std::vector<float> first_variable() const {
    return store.trainable_variables().front().value.to(Device::cpu()).to_vector<float>();
  }

  void step(const Tensor& x, const Tensor& y) {
    ctx.begin_call();
    Tensor logits = model(ctx, x);
    loss = est::nn::sparse_softmax_cross_entropy(y, logits);
    est::optim::sgd(1e-3).minimize(loss, ctx).run();
  }
};

struct Options {
  std::string device = "gpu";
  int warmup = 20, steps = 200, repeats = 5, threads = 2;
  std::vector<int64_t> cnn_batches{64, 1024};
  std::vector<std::string> precisions{"float32", "tf32"};
  int64_t resnet_batch = 256, resnet_size = 32, resnet_width = 64;
  int resnet_blocks = 3;
  std::string resnet_policy = "mixed_bfloat16";
};

// Steps/s of `run_one(i)`: `warmup` steps, then the median of `repeats` timed runs.
double steps_per_sec(const Options& o, Device device, int steps,
                     const std::function<void(int)>& run_one) {
  int next = 0;
  for (int i = 0; i < o.warmup; ++i) run_one(next++);
  std::vector<double> rates;
  for (int r = 0; r < o.repeats; ++r) {
    synchronize(device);
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) run_one(next++);
    synchronize(device);
    rates.push_back(steps / std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// On the CPU there is no graph: the CapturedStep's eager path runs a few steps, which must train.
void check_captured_step_on_cpu(const std::string& key, Trainer& t) {
  Tensor static_images = t.images[0].clone(), static_labels = t.labels[0].clone();
  est::nn::CapturedStep captured({static_images, static_labels},
                                 [&] { t.step(static_images, static_labels); });
  const std::vector<float> before = t.first_variable();
  constexpr int kSteps = 3;
  for (int i = 0; i < kSteps; ++i) captured.run({t.images[i % kRing], t.labels[i % kRing]});
  if (t.first_variable() == before)
    throw est::InternalError("the CapturedStep's steps left the variables unchanged");
  fmt::print(
      "{} skipped=\"CUDA graphs need a GPU; the CapturedStep's eager path trained {} "
      "steps\"\n",
      key, kSteps);
}

void measure(const Options& o, Device device, const std::string& model_name, int64_t batch,
             const std::string& mode, const std::string& precision, int steps,
             const std::function<std::unique_ptr<Trainer>()>& make, const std::string& convs = "") {
  const std::string key =
      fmt::format("est train model={} batch={} mode={} precision={}{}", model_name, batch, mode,
                  precision, convs.empty() ? "" : " convs=" + convs);
  if (precision == "tf32" && !device.is_cuda()) {
    fmt::print("{} skipped=\"TF32 is a GPU mode\"\n", key);
    return;
  }
  try {
    if (mode == "graph" && !device.is_cuda()) {
      std::unique_ptr<Trainer> t = make();
      check_captured_step_on_cpu(key, *t);
      std::fflush(stdout);
      return;
    }
    std::unique_ptr<Trainer> t = make();
    std::unique_ptr<est::nn::CapturedStep> captured;
    Tensor static_images, static_labels;
    std::function<void(int)> run_one;
    if (mode == "graph") {
      static_images = t->images[0].clone();
      static_labels = t->labels[0].clone();
      captured = std::make_unique<est::nn::CapturedStep>(
          std::vector<Tensor>{static_images, static_labels},
          [&t, static_images, static_labels] { t->step(static_images, static_labels); });
      run_one = [&](int i) { captured->run({t->images[i % kRing], t->labels[i % kRing]}); };
    } else {
      run_one = [&](int i) { t->step(t->images[i % kRing], t->labels[i % kRing]); };
    }
    const double rate = steps_per_sec(o, device, steps, run_one);
    if (captured && !captured->captured())
      throw est::InternalError("the step was never captured into a CUDA graph");
    const double loss = t->loss.item();  // after the timing: the last step's loss, on the host
    fmt::print("{} steps_per_sec={:.2f} examples_per_sec={:.1f} loss={:.4f}\n", key, rate,
               rate * static_cast<double>(batch), loss);
  } catch (const std::exception& e) {
    fmt::print("{} error=\"{}\"\n", key, one_line(e.what()));
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("Training steps/s of est's tutorial CNN and a ResNet-style net on one device.",
               "gpu_bench");
  app.add_option("--device", o.device, "gpu (/gpu:0) or cpu")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps first (>= 3: the graph is captured then)")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "steps per timed run of the CNN (the ResNet: a quarter)")
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed runs per figure (the median is printed)")
      ->capture_default_str();
  app.add_option("--cnn-batches", o.cnn_batches, "batch sizes of the tutorial CNN")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--precisions", o.precisions,
                 "the CNN's precisions: float32 (TF32 off), tf32 (TF32 on; GPU only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"float32", "tf32"}))
      ->capture_default_str();
  app.add_option("--resnet-batch", o.resnet_batch, "batch size of the ResNet-style net (0: none)")
      ->capture_default_str();
  app.add_option("--resnet-size", o.resnet_size, "its image height and width")
      ->capture_default_str();
  app.add_option("--resnet-width", o.resnet_width, "its channels")->capture_default_str();
  app.add_option("--resnet-blocks", o.resnet_blocks, "its residual blocks")->capture_default_str();
  app.add_option("--resnet-policy", o.resnet_policy, "its dtype policy (Keras's names)")
      ->check(CLI::IsMember({"mixed_bfloat16", "float32"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.warmup < 3 || o.steps < 1 || o.repeats < 1) {
    fmt::print(stderr, "gpu_bench: --warmup must be >= 3, --steps and --repeats >= 1\n");
    return 2;
  }
  est::ops::set_num_threads(o.threads);
  const Device device = o.device == "gpu" ? Device::cuda(0) : Device::cpu();
  if (device.is_cuda()) {
#if EST_HAVE_CUDA
    try {
      const est::ops::cuda::DeviceProperties p = est::ops::cuda::properties(0);
      fmt::print("est device=/gpu:0 name=\"{}\" memory_mib={} sm={}{}\n", p.name,
                 p.total_memory >> 20, p.compute_major, p.compute_minor);
    } catch (const std::exception& e) {
      fmt::print("est device=/gpu:0 error=\"{}\"\n", one_line(e.what()));
      return 1;
    }
#else
    fmt::print("est device=/gpu:0 error=\"this build has no CUDA (meson -Dcuda=disabled)\"\n");
    return 1;
#endif
  } else {
    fmt::print("est device=/cpu:0 threads={}\n", o.threads);
  }
  fmt::print(
      "est precision: float32 rows run with TF32 off, tf32 rows with it on (cuBLAS math mode and "
      "cuDNN convolution math, ops::enable_tensor_float_32_execution); the ResNet under {} with "
      "TF32 {}\n",
      o.resnet_policy, o.resnet_policy == "float32" ? "off" : "on");
  std::fflush(stdout);

  for (int64_t batch : o.cnn_batches) {
    auto make = [&] {
      return std::make_unique<Trainer>(
          device,
          [](est::ModelContext& ctx, const Tensor& x) { return examples::tutorial_cnn(ctx, x); },
          est::Shape{batch, 28, 28, 1});
    };
    for (const std::string& precision : o.precisions) {
      est::ops::enable_tensor_float_32_execution(precision == "tf32");
      for (const char* mode : {"eager", "graph"})
        measure(o, device, "cnn", batch, mode, precision, o.steps, make);
    }
  }
  if (o.resnet_batch > 0) {
    // The ResNet under a Keras dtype policy (mixed_bfloat16: bfloat16 compute, float32
    // variables), as torch's side runs under bfloat16 autocast.
    est::nn::mixed_precision::PolicyScope policy(o.resnet_policy);
    const bool tensor_float_32 = o.resnet_policy != "float32" && device.is_cuda();
    est::ops::enable_tensor_float_32_execution(tensor_float_32);
    // How the convolutions compute: in float32 through casts under mixed_bfloat16 (the CUDA
    // and reference convolutions have no bfloat16 kernel; see the header comment).
    const std::string convs = o.resnet_policy == "float32"
                                  ? "float32"
                                  : (tensor_float_32 ? "tf32_via_casts" : "float32_via_casts");
    auto make = [&] {
      return std::make_unique<Trainer>(
          device,
          [&](est::ModelContext& ctx, const Tensor& x) {
            return bench::resnet_style(ctx, x, o.resnet_width, o.resnet_blocks);
          },
          est::Shape{o.resnet_batch, o.resnet_size, o.resnet_size, 3});
    };
    measure(o, device, "resnet", o.resnet_batch, "eager", o.resnet_policy, std::max(1, o.steps / 4),
            make, convs);
  }
  return 0;
}
