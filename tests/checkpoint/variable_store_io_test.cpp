// Checkpoints of an nn::VariableStore: slots detected by name, trainable flags kept, restore
// in place or staged before the variables exist, and an optimizer that continues exactly
// where it stopped.
#include "checkpoint/variable_store_io.h"
#include "helpers.h"
#include "nn/optimizers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

// Three Adam steps on one kernel with fixed gradients.
void train(nn::VariableStore& store, const nn::optim::Optimizer& adam, int steps) {
  Tensor kernel = store.get("dense/kernel").value;
  for (int step = 0; step < steps; ++step) {
    Tensor gradient = iota<float>({2, 3}, 0.5 - step, 0.25);
    adam.apply_gradients(store, {gradient}, {kernel});
  }
}

}  // namespace

TEST_CASE("a variable store round-trips with its optimizer slots") {
  TempDir dir;
  nn::optim::Optimizer adam = nn::optim::adam(0.1);
  nn::VariableStore store;
  store.create("dense/kernel", iota<float>({2, 3}, 1, 1), true);
  store.create("batch_norm/moving_mean", Tensor::zeros({3}), false);
  train(store, adam, 3);

  TensorBundle bundle = bundle_from_store(store);
  CHECK(bundle.global_step == 3);
  REQUIRE(bundle.find("dense/kernel/Adam") != nullptr);
  CHECK(bundle.find("dense/kernel/Adam")->kind == EntryKind::kSlot);
  CHECK(bundle.find("dense/kernel/Adam_1")->kind == EntryKind::kSlot);
  CHECK(bundle.find("dense/kernel")->kind == EntryKind::kVariable);
  CHECK(bundle.find("dense/kernel")->trainable);
  CHECK_FALSE(bundle.find("batch_norm/moving_mean")->trainable);
  CHECK(bundle.find("global_step")->kind == EntryKind::kVariable);
  CHECK(bundle.find("dense/kernel")->value.shares_storage(store.get("dense/kernel").value));
  bundle.add_blob("iterator", "at 96");
  CheckpointManager manager({.directory = dir.str(), .async = false});
  CHECK(manager.save(bundle) == dir / "model.ckpt-3.h5");

  // A fresh process: only the layer exists when restoring (before the first training step),
  // so slots, beta powers and the global step are staged and claimed on creation.
  nn::VariableStore resumed;
  resumed.create("dense/kernel", Tensor::zeros({2, 3}), true);
  resumed.create("batch_norm/moving_mean", Tensor::ones({3}), false);
  RestoreResult result = restore_store(dir.str(), resumed);
  CHECK(result.global_step == 3);
  CHECK(same_bytes(resumed.get("dense/kernel").value, store.get("dense/kernel").value));
  CHECK(resumed.get("batch_norm/moving_mean").value.at({0}) == 0.0);
  CHECK_FALSE(result.unused.empty());
  CHECK(resumed.pending_restores().size() == result.unused.size());
  REQUIRE(result.blobs.size() == 1);
  CHECK(result.blobs[0].bytes == "at 96");
  CHECK(nn::read_global_step(resumed) == 3);

  // One more step on both: bit-identical, so the optimizer state came back exactly.
  train(store, adam, 1);
  train(resumed, adam, 1);
  CHECK(resumed.pending_restores().empty());
  CHECK(same_bytes(resumed.get("dense/kernel").value, store.get("dense/kernel").value));
  CHECK(
      same_bytes(resumed.get("dense/kernel/Adam_1").value, store.get("dense/kernel/Adam_1").value));
  CHECK(nn::read_global_step(resumed) == 4);
}

TEST_CASE("restoring a store checks shapes first and reports missing variables") {
  TempDir dir;
  nn::VariableStore store;
  store.create("dense/kernel", Tensor::ones({2, 3}), true);
  store.create("dense/bias", Tensor::ones({3}), true);
  save(dir / "model.ckpt-1.h5", bundle_from_store(store));

  nn::VariableStore wrong;
  wrong.create("dense/kernel", Tensor::zeros({3, 2}), true);
  wrong.create("dense/bias", Tensor::zeros({3}), true);
  CHECK_THROWS_AS(restore_store(dir / "model.ckpt-1.h5", wrong), InvalidArgumentError);
  CHECK(wrong.get("dense/bias").value.at({0}) == 0.0);  // nothing restored

  nn::VariableStore bigger;
  bigger.create("dense/kernel", Tensor::zeros({2, 3}), true);
  bigger.create("dense/bias", Tensor::zeros({3}), true);
  bigger.create("head/kernel", Tensor::zeros({3, 1}), true);
  CHECK_THROWS_AS(restore_store(dir / "model.ckpt-1.h5", bigger), NotFoundError);
  RestoreResult result = restore_store(dir / "model.ckpt-1.h5", bigger, {.allow_missing = true});
  CHECK(result.missing == std::vector<std::string>{"head/kernel"});
  CHECK(bigger.get("dense/bias").value.at({2}) == 1.0);
}
