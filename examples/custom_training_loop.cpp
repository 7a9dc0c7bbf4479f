// A custom training loop under MirroredStrategy, as in TensorFlow's distributed-training guide:
// no Estimator, the step written by hand. Two logical CPU devices each take half of every
// global batch; each replica's loss is its per-example losses summed and divided by the
// GLOBAL batch size, so the all-reduced (summed) gradients equal those of one replica on the
// whole batch. The mean loss over the global batch is reduced across replicas for logging.
//
//   custom_training_loop [--steps N] [--global_batch B] [--devices /cpu:0,/cpu:1]
#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <est/data/data.h>
#include <est/distribute/distribute.h>
#include <est/nn/nn.h>

#include "examples/cnn_model.h"

namespace {

struct Options {
  int64_t steps = 500;
  int64_t global_batch = 128;
  std::vector<std::string> devices{"/cpu:0", "/cpu:1"};
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) throw est::InvalidArgumentError("flag " + flag + " needs a value");
    std::string value = argv[i + 1];
    if (flag == "--steps") {
      options.steps = std::atoll(value.c_str());
    } else if (flag == "--global_batch") {
      options.global_batch = std::atoll(value.c_str());
    } else if (flag == "--devices") {
      options.devices.clear();
      std::stringstream names(value);
      for (std::string name; std::getline(names, name, ',');) options.devices.push_back(name);
    } else {
      throw est::InvalidArgumentError("unknown flag " + flag +
                                      " (known: --steps --global_batch --devices)");
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) try {
  Options options = parse(argc, argv);
  est::distribute::MirroredStrategy strategy(options.devices,
                                             est::distribute::CrossDeviceOps::kReductionToOneDevice,
                                             /*seed=*/42);
  fmt::print("Using {}\n", strategy.description());
  // Checks that the global batch splits evenly over the replicas (an error names both numbers).
  int64_t per_replica_batch =
      strategy.input_context().get_per_replica_batch_size(options.global_batch);
  fmt::print("global batch {} = {} replicas x {}\n", options.global_batch,
             strategy.num_replicas_in_sync(), per_replica_batch);

  auto dataset = est::data::fashion_mnist("train")
                     .map(est::data::scale)
                     .cache()
                     .shuffle(10000, 42)
                     .repeat()
                     .batch(options.global_batch, /*drop_remainder=*/true);
  auto batches = strategy.distribute_dataset(dataset).iterator();
  auto optimizer = est::optim::sgd(0.05);
  const double global_batch = static_cast<double>(options.global_batch);

  for (int64_t step = 0; step < options.steps; ++step) {
    auto per_replica = batches.next();
    if (!per_replica) break;
    est::distribute::PerReplica losses = strategy.run(
        [&](est::distribute::ReplicaContext& replica) {
          est::ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          const est::data::Element& batch = replica.input();
          est::Tensor logits = examples::tutorial_cnn(ctx, batch.features.at("image"));
          est::Tensor per_example = est::nn::sparse_softmax_cross_entropy(
              batch.labels, logits, 1.0, est::nn::Reduction::kNone);
          est::Tensor loss = est::ops::mul(est::ops::sum(per_example), 1.0 / global_batch);
          optimizer.minimize(loss, ctx).run(replica.gradient_transform());
          return loss;
        },
        *per_replica);
    if (step % 100 == 0 || step + 1 == options.steps)
      fmt::print("step {}: loss = {:.4f}\n", step,
                 strategy.reduce(est::distribute::ReduceOp::kSum, losses).item());
  }
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
