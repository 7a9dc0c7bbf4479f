// Checkpoints of mixed_bfloat16 models: the variables are float32 master weights, so a mixed
// model's checkpoint restores into the same model under float32 and back, bit for bit; a
// bfloat16 tensor in a bundle is refused, naming it.
#include "checkpoint/checkpoint.h"
#include "checkpoint/variable_store_io.h"
#include "helpers.h"
#include "nn/nn.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;
using nn::mixed_precision::PolicyScope;

namespace {

const Tensor kInput = Tensor::from_vector<float>({0.5f, -1.0f, 0.25f, 2.0f, -0.5f, 1.5f}, {3, 2});
const Tensor kLabels = Tensor::from_vector<int64_t>({0, 1, 1});

Tensor model(nn::ModelContext& ctx) {
  Tensor h = nn::dense(ctx, kInput, {.units = 8, .activation = nn::relu});
  h = nn::batch_normalization(ctx, h);
  return nn::dense(ctx, h, {.units = 2});
}

// One training step of the model under the global policy `policy`; returns the logits.
Tensor train_step(const char* policy, nn::VariableStore& store, uint64_t seed) {
  PolicyScope scope(policy);
  nn::ModelContext ctx(store, nn::Mode::kTrain, seed);
  ctx.begin_call();
  Tensor logits = model(ctx);
  nn::optim::sgd(0.1).minimize(nn::sparse_softmax_cross_entropy(kLabels, logits), ctx).run();
  return logits;
}

void check_same_variables(const nn::VariableStore& a, const nn::VariableStore& b) {
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    INFO(name);
    CHECK(a.get(name).value.dtype() != DType::kBF16);  // float32, global_step int64
    CHECK(same_bytes(a.get(name).value, b.get(name).value));
  }
}

}  // namespace

TEST_CASE("a mixed_bfloat16 checkpoint restores into a float32 model and back") {
  TempDir dir;
  nn::VariableStore mixed;
  CHECK(train_step("mixed_bfloat16", mixed, 11).dtype() == DType::kBF16);
  save(dir / "mixed.h5", bundle_from_store(mixed));

  // the same model under float32 (its own initial values), then restored from the mixed one
  nn::VariableStore single;
  CHECK(train_step("float32", single, 99).dtype() == DType::kF32);
  restore_store(dir / "mixed.h5", single);
  check_same_variables(mixed, single);

  // trained on in float32, saved, and restored into the mixed model
  train_step("float32", single, 99);
  save(dir / "float32.h5", bundle_from_store(single));
  restore_store(dir / "float32.h5", mixed);
  check_same_variables(single, mixed);
}

TEST_CASE("a bfloat16 tensor in a checkpoint is refused, naming it") {
  TempDir dir;
  TensorBundle bundle;
  bundle.add_variable("dense/kernel", Tensor::ones({2, 2}), true);
  bundle.add_variable("half/kernel", ops::cast(Tensor::ones({2, 2}), DType::kBF16), true);
  try {
    save(dir / "bad.h5", bundle);
    FAIL("saved a bfloat16 variable");
  } catch (const InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("\"half/kernel\" is bfloat16") != std::string::npos);
    CHECK(std::string(e.what()).find("float32") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "bad.h5"));
}
