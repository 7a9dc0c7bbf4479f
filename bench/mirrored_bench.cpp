// MirroredStrategy and CentralStorageStrategy over two logical CPU devices (one replica thread
// each, cores/2 OpenMP threads per replica) against OneDeviceStrategy (one replica, every core)
// on the tutorial CNN at the same global batch: training examples/s of each and their ratios to
// OneDevice (issue 6's target for mirrored: >= 0.9). Central storage sums the gradients like
// mirrored but applies the update once, on replica 0's thread, while the other replica waits.
// Batches come from memory, as in cnn_bench, so only the step is timed. Every step goes
// through replica.run_train_op.
//
//   mirrored_bench [--global_batch B] [--steps N] [--repeats R]
// Lines: `one_device examples_per_sec=...`, `mirrored ...`, `central_storage ...`, then
// `ratio=...` (mirrored / one_device) and `central_ratio=...` (central / one_device).
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <est/distribute/distribute.h>
#include <est/nn/nn.h>

#include "bench/fashion_mnist_memory.h"
#include "examples/cnn_model.h"

namespace {

using est::Tensor;
namespace dist = est::distribute;

// Per-replica batches of the global batch starting at row `first`.
std::vector<est::data::Element> replica_batches(const bench::InMemoryData& data, int64_t first,
                                                int64_t global_batch, int replicas) {
  std::vector<est::data::Element> batches;
  int64_t per_replica = global_batch / replicas;
  for (int r = 0; r < replicas; ++r) {
    Tensor images = Tensor::empty({per_replica, 28, 28, 1});
    Tensor labels = Tensor::empty({per_replica}, est::DType::kI64);
    bench::copy_rows(data, first + r * per_replica, images, labels);
    batches.emplace_back(est::Features{{"image", images}}, labels);
  }
  return batches;
}

// Median examples/s of `repeats` runs of `steps` training steps under `strategy`.
double train_rate(dist::Strategy& strategy, const bench::InMemoryData& data, int64_t global_batch,
                  int64_t steps, int repeats) {
  int replicas = strategy.num_replicas_in_sync();
  double scale = 1.0 / static_cast<double>(global_batch);
  int64_t batches = data.images.dim(0) / global_batch, next = 0;
  auto step = [&] {
    auto inputs = replica_batches(data, (next++ % batches) * global_batch, global_batch, replicas);
    strategy.run(
        [&](dist::ReplicaContext& replica) {
          est::ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = examples::tutorial_cnn(ctx, replica.input().features.at("image"));
          Tensor losses = est::nn::sparse_softmax_cross_entropy(replica.input().labels, logits, 1.0,
                                                                est::nn::Reduction::kNone);
          Tensor loss = est::ops::mul(est::ops::sum(losses), scale);
          replica.run_train_op(est::optim::sgd(1e-3).minimize(loss, ctx));
          return loss;
        },
        inputs);
  };
  for (int i = 0; i < 10; ++i) step();  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) step();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(steps * global_batch) / seconds);
  }
  return bench::median(rates);
}

}  // namespace

int main(int argc, char** argv) try {
  int64_t global_batch = 128, steps = 200;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--global_batch")
      global_batch = std::atoll(argv[i + 1]);
    else if (flag == "--steps")
      steps = std::atoll(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
  }
  bench::InMemoryData data = bench::load_fashion_mnist("train");
  dist::OneDeviceStrategy one_device("/cpu:0", 7);
  dist::MirroredStrategy mirrored({"/cpu:0", "/cpu:1"}, dist::CrossDeviceOps::kReductionToOneDevice,
                                  7);
  dist::CentralStorageStrategy central({"/cpu:0", "/cpu:1"}, 7);
  double one = train_rate(one_device, data, global_batch, steps, repeats);
  double two = train_rate(mirrored, data, global_batch, steps, repeats);
  double shared = train_rate(central, data, global_batch, steps, repeats);
  fmt::print("global_batch={}\n", global_batch);
  fmt::print("one_device threads_per_replica={} examples_per_sec={:.1f}\n",
             one_device.threads_per_replica(), one);
  fmt::print("mirrored replicas=2 threads_per_replica={} examples_per_sec={:.1f}\n",
             mirrored.threads_per_replica(), two);
  fmt::print("central_storage replicas=2 threads_per_replica={} examples_per_sec={:.1f}\n",
             central.threads_per_replica(), shared);
  fmt::print("ratio={:.3f} (target >= 0.9)\n", two / one);
  fmt::print("central_ratio={:.3f}\n", shared / one);
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
