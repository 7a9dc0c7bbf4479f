// CUDA graph capture of a training step (ops/cuda/graph.h, nn/captured_step.h) on a real GPU:
// a captured SGD step of a dense model replayed N times equals N eager steps, the graph's
// private pool serves the capture, is not touched by replays and goes with the graph, and a
// host read, a host copy or a synchronisation inside the capture fails naming it and leaves the
// device usable. Built everywhere; its main (tests/main.cpp with EST_TEST_REQUIRES_GPU) exits 77,
// meson's skip, where no GPU can run. The pool's logic is tested on any machine in
// block_cache_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "nn/captured_step.h"
#include "ops/allocator.h"
#include "ops/ops.h"
#include "tests/ops/expect_error.h"
#if EST_HAVE_CUDA
#include "ops/cuda/graph.h"
#include "ops/cuda/runtime.h"
#endif

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

#if EST_HAVE_CUDA
namespace {

const Device kGpu = Device::cuda(0);

Tensor values(const Shape& shape, int seed) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed) * 5) % 13) - 6) /
           8.0f;
  return Tensor::from_vector(v, shape);
}

// A dense model: relu(x kernel + bias), mean squared error, SGD in place. No host reads.
struct Dense {
  Tensor kernel = values({16, 8}, 1).to(kGpu);
  Tensor bias = values({8}, 2).to(kGpu);
  Tensor loss;

  void step(const Tensor& x, const Tensor& y) {
    Tensor k = kernel.detach().set_requires_grad(true), b = bias.detach().set_requires_grad(true);
    loss = mean(squared_difference(linear(x, k, b, Activation::kRelu), y));
    backward(loss);
    NoGradGuard no_grad;
    add_scaled_in_place(kernel, k.grad(), -0.05);
    add_scaled_in_place(bias, b.grad(), -0.05);
  }
};

double max_difference(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(x.data<float>()[i]) -
                                     static_cast<double>(y.data<float>()[i])));
  return worst;
}

}  // namespace

TEST_CASE("gpu graph: dropout in a capture draws each replay the mask the eager step would") {
  // Issue 22, defect 3: the generator's state was baked into the captured kernel's arguments
  // (the same mask every replay), and the jump table's first copy to the GPU synchronised the
  // capturing stream. This case comes first in the file, so that copy happens in the capture.
  Generator gpu_generator(23), cpu_generator(23);
  const Tensor ones = Tensor::ones({1000});
  const Tensor ones_gpu = ones.to(kGpu);
  Tensor mask = Tensor::zeros({1000}, DType::kF32, kGpu);
  cuda::Graph graph(0);
  cuda::capture(graph, [&] {
    mask.copy_from(dropout(ones_gpu, 0.5, gpu_generator));
    mask.copy_from(add(mask, dropout(ones_gpu, 0.25, gpu_generator)));  // a second draw
  });
  REQUIRE(graph.captured());
  CHECK(gpu_generator.state() == cpu_generator.state());  // the capture ran nothing
  std::vector<float> previous;
  for (int replay = 0; replay < 3; ++replay) {
    CAPTURE(replay);
    graph.replay();
    const Tensor first = dropout(ones, 0.5, cpu_generator);
    const std::vector<float> expected =
        add(first, dropout(ones, 0.25, cpu_generator)).to_vector<float>();
    const std::vector<float> got = mask.to(Device::cpu()).to_vector<float>();
    CHECK(got == expected);
    CHECK(got != previous);
    CHECK(gpu_generator.state() == cpu_generator.state());
    previous = got;
  }
  // Eager draws after the replays go on from where the replays left the generator.
  CHECK(dropout(ones_gpu, 0.5, gpu_generator).to_vector<float>() ==
        dropout(ones, 0.5, cpu_generator).to_vector<float>());
}

TEST_CASE("gpu graph: a captured SGD step replayed N times equals N eager steps") {
  const Tensor x = values({32, 16}, 3).to(kGpu), y = values({32, 8}, 4).to(kGpu);
  constexpr int kSteps = 6, kWarmup = 2;
  Dense eager;
  std::vector<double> eager_losses;
  for (int s = 0; s < kSteps; ++s) {
    eager.step(x, y);
    eager_losses.push_back(eager.loss.item());
  }
  Dense captured;
  for (int s = 0; s < kWarmup; ++s) captured.step(x, y);
  cuda::Graph graph(0);
  cuda::capture(graph, [&] { captured.step(x, y); });
  CHECK(graph.captured());
  CHECK(graph.nodes() > 0);
  for (int s = kWarmup; s < kSteps; ++s) {
    graph.replay();
    CHECK(captured.loss.item() == doctest::Approx(eager_losses[static_cast<size_t>(s)]));
  }
  CHECK(max_difference(captured.kernel, eager.kernel) <= 1e-6);
  CHECK(max_difference(captured.bias, eager.bias) <= 1e-6);
  CHECK(eager_losses.back() < eager_losses.front());  // the steps did train
}

TEST_CASE("gpu graph: the private pool serves the capture, replays reuse it, it goes with it") {
  const Tensor x = values({64, 16}, 5).to(kGpu), y = values({64, 8}, 6).to(kGpu);
  Dense model;
  model.step(x, y);
  model.step(x, y);
  Allocator& allocator = allocator_for(kGpu);
  int64_t frees_before = 0;
  {
    cuda::Graph graph(0);
    CHECK(graph.pool_bytes() == 0);
    cuda::capture(graph, [&] { model.step(x, y); });
    const int64_t pool = graph.pool_bytes();
    CHECK(pool > 0);  // the step's activations, gradients and loss live in the pool
    const AllocatorStats after_capture = allocator.stats();
    for (int s = 0; s < 20; ++s) graph.replay();
    cuda::synchronize(0);
    const AllocatorStats after_replays = allocator.stats();
    CHECK(after_replays.system_allocations == after_capture.system_allocations);
    CHECK(after_replays.allocations == after_capture.allocations);
    CHECK(graph.pool_bytes() == pool);
    // Eager work between replays never gets the pool's blocks: the next replay still matches.
    Tensor scratch = Tensor::zeros({64, 8}, DType::kF32, kGpu);
    graph.replay();
    const double replayed = model.loss.item();
    CHECK(std::isfinite(replayed));
    model.loss = Tensor();  // the graph's output: back to the pool
    frees_before = allocator.stats().system_frees;
  }
  CHECK(allocator.stats().system_frees > frees_before);  // the pool's blocks went back
}

TEST_CASE("gpu graph: a host read, a host copy or a synchronisation inside capture fails") {
  const Tensor x = values({8, 16}, 7).to(kGpu), y = values({8, 8}, 8).to(kGpu);
  Dense model;
  model.step(x, y);
  {
    cuda::Graph graph(0);
    const std::string message = error_message<FailedPreconditionError>([&] {
      cuda::capture(graph, [&] {
        model.step(x, y);
        model.loss.item();
      });
    });
    CHECK(contains(message, "a copy from the GPU to the host (Tensor::item, Tensor::to)"));
    CHECK(contains(message, "float32 [] tensor inside a CUDA graph capture of /gpu:0"));
    CHECK(!graph.captured());
    CHECK(!cuda::capturing(0));
  }
  {
    cuda::Graph graph(0);
    CHECK(contains(error_message<FailedPreconditionError>(
                       [&] { cuda::capture(graph, [&] { values({4}, 1).to(kGpu); }); }),
                   "a copy from the host to the GPU of a float32 [4] tensor"));
  }
  {
    cuda::Graph graph(0);
    CHECK(contains(error_message<FailedPreconditionError>(
                       [&] { cuda::capture(graph, [&] { cuda::synchronize(0); }); }),
                   "synchronize(/gpu:0) inside a CUDA graph capture"));
    CHECK(contains(error_message<FailedPreconditionError>([&] { graph.replay(); }),
                   "was not captured"));
  }
  {
    // What a kernel that synchronises inside the capture throws (ops/cuda/check.h).
    cuda::Graph graph(0);
    const std::string message = error_message<FailedPreconditionError>([&] {
      cuda::capture(graph, [] {
        throw InternalError(
            "CUDA error cudaErrorStreamCaptureUnsupported (operation not permitted when stream "
            "is capturing) in cudaStreamSynchronize(stream) at ops/cuda/some_op.cu:12");
      });
    });
    CHECK(contains(message, "an op made a CUDA call that graph capture forbids on /gpu:0"));
    CHECK(contains(message, "in cudaStreamSynchronize(stream) at ops/cuda/some_op.cu:12"));
    CHECK(!cuda::capturing(0));
  }
  model.step(x, y);  // the device still works eagerly after the abandoned captures
  CHECK(std::isfinite(model.loss.item()));
}

TEST_CASE("gpu graph: the sparse cross-entropy and gather capture; bad ids give NaN and zeros") {
  // Their id checks are asynchronous (ops/cuda/id_check.h), in a replay as eagerly: a bad id
  // shows in the values (NaN, zeros, as TensorFlow's GPU kernels) and the first one is reported
  // at the next synchronisation point.
  Tensor logits = values({4, 5}, 3).to(kGpu);
  Tensor labels = Tensor::from_vector(std::vector<int64_t>{0, 4, 2, 1}, {4}).to(kGpu);
  Tensor params = values({6, 3}, 4).to(kGpu);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{5, 0, 2}, {3}).to(kGpu);
  const std::vector<double> eager_loss = sparse_softmax_cross_entropy_with_logits(labels, logits)
                                             .to(Device::cpu())
                                             .to_vector<double>();
  const std::vector<double> eager_rows =
      gather(params, ids, 0).to(Device::cpu()).to_vector<double>();
  Tensor loss, rows;
  cuda::Graph graph(0);
  cuda::capture(graph, [&] {
    loss = sparse_softmax_cross_entropy_with_logits(labels, logits);
    rows = gather(params, ids, 0);
  });
  graph.replay();
  CHECK(loss.to(Device::cpu()).to_vector<double>() == eager_loss);
  CHECK(rows.to(Device::cpu()).to_vector<double>() == eager_rows);
  labels.copy_from(Tensor::from_vector(std::vector<int64_t>{0, 9, 2, 1}, {4}).to(kGpu));
  ids.copy_from(Tensor::from_vector(std::vector<int64_t>{5, -1, 2}, {3}).to(kGpu));
  graph.replay();
  CHECK(contains(error_message<InvalidArgumentError>([&] { loss.to(Device::cpu()); }),
                 "sparse_softmax_cross_entropy_with_logits: label 9 at index 1"));
  const std::vector<double> bad_loss = loss.to(Device::cpu()).to_vector<double>();
  CHECK(bad_loss[0] == eager_loss[0]);
  CHECK(std::isnan(bad_loss[1]));
  const std::vector<double> bad_rows = rows.to(Device::cpu()).to_vector<double>();
  for (int c = 0; c < 3; ++c) CHECK(bad_rows[3 + c] == 0.0);
  CHECK(bad_rows[0] == eager_rows[0]);
}

TEST_CASE("gpu graph: CapturedStep copies each batch into its static inputs and replays") {
  constexpr int kSteps = 6;
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < kSteps; ++s) {
    xs.push_back(values({32, 16}, 10 + s).to(kGpu));
    ys.push_back(values({32, 8}, 20 + s).to(kGpu));
  }
  Dense eager;
  std::vector<double> eager_losses;
  for (int s = 0; s < kSteps; ++s) {
    eager.step(xs[static_cast<size_t>(s)], ys[static_cast<size_t>(s)]);
    eager_losses.push_back(eager.loss.item());
  }
  Dense model;
  Tensor x = Tensor::zeros({32, 16}, DType::kF32, kGpu),
         y = Tensor::zeros({32, 8}, DType::kF32, kGpu);
  nn::CapturedStep step({x, y}, [&] { model.step(x, y); });
  for (int s = 0; s < kSteps; ++s) {
    step.run({xs[static_cast<size_t>(s)], ys[static_cast<size_t>(s)]});
    CHECK(step.captured() == (s >= 2));
    CHECK(model.loss.item() == doctest::Approx(eager_losses[static_cast<size_t>(s)]));
  }
  CHECK(step.graph_nodes() > 0);
  CHECK(max_difference(model.kernel, eager.kernel) <= 1e-6);
}
#else
TEST_CASE("gpu graph: needs a build with CUDA" * doctest::skip()) {}
#endif
