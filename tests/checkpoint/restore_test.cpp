// restore_into and warm start: in-place assignment, the checks on names, shapes and dtypes,
// and all-or-nothing behaviour.
#include "helpers.h"
#include "ops/allocator.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

// The model as it is before restoring: same names and shapes, different values.
TensorBundle fresh_model() {
  TensorBundle model = sample_bundle(0, 100);
  model.blobs.clear();
  return model;
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("restore_into assigns in place: every alias sees the values") {
  TempDir dir;
  TensorBundle saved = sample_bundle(42);
  save(dir / "model.ckpt-42.h5", saved);

  TensorBundle model = fresh_model();
  Tensor alias = model.find("dense/kernel")->value;  // e.g. held by an optimizer
  RestoreResult result = restore_into(dir / "model.ckpt-42.h5", model);
  CHECK(result.path == dir / "model.ckpt-42.h5");
  CHECK(result.global_step == 42);
  CHECK(result.missing.empty());
  CHECK(result.unused.empty());
  CHECK(result.skipped.empty());
  CHECK(alias.shares_storage(model.find("dense/kernel")->value));
  CHECK(same_bytes(alias, saved.find("dense/kernel")->value));
  check_same_bundle(saved, model);
}

TEST_CASE("restore_into reads straight into the model: no staging copy of the checkpoint's size") {
  // 6 tensors of 4 MB: a restore that stages them all first needs 24 MB more at its peak; one
  // that verifies through an 8 MB buffer and then reads into the model needs none from the
  // tensor allocator (issue 32, item 5).
  TempDir dir;
  TensorBundle saved;
  saved.global_step = 7;
  for (int i = 0; i < 6; ++i) {
    Tensor value = Tensor::empty({1000 * 1000});
    float* data = value.data<float>();
    for (int64_t j = 0; j < value.numel(); ++j) data[j] = static_cast<float>((i * 7 + j) % 101);
    saved.add_variable("layer_" + std::to_string(i) + "/kernel", value);
  }
  save(dir / "model.ckpt-7.h5", saved);
  TensorBundle model;
  for (const TensorEntry& entry : saved.tensors)
    model.add_variable(entry.name, Tensor::zeros(entry.value.shape()));
  ops::allocator_for(Device::cpu()).reset_peak();
  const int64_t before = ops::memory_stats().bytes_in_use;
  restore_into(dir / "model.ckpt-7.h5", model);
  CHECK(ops::memory_stats().peak_bytes_in_use - before < 4 * 1000 * 1000);
  for (size_t i = 0; i < saved.tensors.size(); ++i)
    CHECK(model.tensors[i].value.to_vector<float>() == saved.tensors[i].value.to_vector<float>());
}

TEST_CASE("shape and dtype mismatches name the variable and both shapes; nothing is restored") {
  TempDir dir;
  save(dir / "model.ckpt-1.h5", sample_bundle(1));
  TensorBundle model = fresh_model();
  model.find("dense/kernel")->value = Tensor::zeros({4, 4});
  model.find("dense/bias")->value = Tensor::zeros({4}, DType::kF64);
  Tensor before = model.find("batch_norm/moving_mean")->value.clone();

  std::string message = message_of([&] { restore_into(dir / "model.ckpt-1.h5", model); });
  CHECK(message.find("\"dense/kernel\" is float32 [3, 4] in the checkpoint but float32 [4, 4] "
                     "in the model") != std::string::npos);
  CHECK(message.find("\"dense/bias\" is float32 [4] in the checkpoint but float64 [4]") !=
        std::string::npos);
  CHECK_THROWS_AS(restore_into(dir / "model.ckpt-1.h5", model), InvalidArgumentError);
  CHECK(same_bytes(model.find("batch_norm/moving_mean")->value, before));
  CHECK(model.global_step == 0);
}

TEST_CASE("variables missing from the checkpoint are errors unless allowed") {
  TempDir dir;
  save(dir / "model.ckpt-1.h5", sample_bundle(1));
  TensorBundle model = fresh_model();
  model.add_variable("new_layer/kernel", Tensor::full({2}, 7.0));
  Tensor before = model.find("dense/kernel")->value.clone();

  std::string message = message_of([&] { restore_into(dir / "model.ckpt-1.h5", model); });
  CHECK(message.find("\"new_layer/kernel\"") != std::string::npos);
  CHECK(message.find("allow_missing") != std::string::npos);
  CHECK_THROWS_AS(restore_into(dir / "model.ckpt-1.h5", model), NotFoundError);
  CHECK(same_bytes(model.find("dense/kernel")->value, before));

  RestoreResult result = restore_into(dir / "model.ckpt-1.h5", model, {.allow_missing = true});
  CHECK(result.missing == std::vector<std::string>{"new_layer/kernel"});
  CHECK(model.find("new_layer/kernel")->value.at({1}) == 7.0);
  CHECK(model.find("dense/kernel")->value.at({0, 1}) == 0.5);

  // Tensors of the file the model does not have are reported, not errors.
  TensorBundle smaller;
  smaller.add_variable("dense/bias", Tensor::zeros({4}));
  result = restore_into(dir / "model.ckpt-1.h5", smaller);
  CHECK(result.unused.size() == sample_bundle(1).tensors.size() - 1);
  CHECK(smaller.find("dense/bias")->value.at({1}) == doctest::Approx(1 * 0.25 - 1));
}

TEST_CASE("warm start: regex over trainable variables, renames, skipped when a checkpoint exists") {
  TempDir old_dir, model_dir;
  TensorBundle old;
  old.global_step = 900;
  old.add_variable("encoder/dense/kernel", Tensor::full({2, 3}, 1.0));
  old.add_variable("encoder/dense/bias", Tensor::full({3}, 2.0));
  old.add_variable("head/kernel", Tensor::full({3, 1}, 3.0));
  old.add_variable("batch_norm/moving_mean", Tensor::full({3}, 4.0), false);
  save(old_dir / "model.ckpt-900.h5", old);
  CheckpointManager({.directory = old_dir.str(), .async = false}).save(old);

  auto new_model = [] {
    TensorBundle model;
    model.add_variable("encoder/dense/kernel", Tensor::zeros({2, 3}));
    model.add_variable("encoder/dense/bias", Tensor::zeros({3}));
    model.add_variable("classifier/kernel", Tensor::zeros({3, 1}));
    model.add_variable("batch_norm/moving_mean", Tensor::zeros({3}), false);
    model.add_slot("encoder/dense/kernel/Adam", Tensor::zeros({2, 3}));
    return model;
  };

  // Only variables matched at the start of the name; non-trainable ones and slots never.
  TensorBundle model = new_model();
  auto result = warm_start(
      model_dir.str(), {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = "encoder/"},
      model);
  REQUIRE(result.has_value());
  CHECK(result->path == old_dir / "model.ckpt-900.h5");
  CHECK(result->warm_started ==
        std::vector<std::string>{"encoder/dense/kernel", "encoder/dense/bias"});
  CHECK(model.find("encoder/dense/kernel")->value.at({1, 2}) == 1.0);
  CHECK(model.find("encoder/dense/bias")->value.at({0}) == 2.0);
  CHECK(model.find("classifier/kernel")->value.at({0, 0}) == 0.0);
  CHECK(model.find("batch_norm/moving_mean")->value.at({0}) == 0.0);
  CHECK(model.find("encoder/dense/kernel/Adam")->value.at({0, 0}) == 0.0);
  CHECK(model.global_step == 0);  // warm start does not carry the step

  // Matching starts at the beginning of the name: "dense" selects nothing here.
  model = new_model();
  result =
      warm_start(model_dir.str(),
                 {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = "dense"}, model);
  REQUIRE(result.has_value());
  CHECK(result->warm_started.empty());
  // ".*" selects classifier/kernel too, which the old checkpoint lacks.
  CHECK_THROWS_AS(
      warm_start(model_dir.str(),
                 {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = ".*"}, model),
      NotFoundError);
  std::string message = message_of(
      [&] { warm_start(model_dir.str(), {.ckpt_to_initialize_from = old_dir.str()}, model); });
  CHECK(message.find("\"classifier/kernel\"") != std::string::npos);
  CHECK(model.find("encoder/dense/kernel")->value.at({0, 0}) == 0.0);  // all or nothing

  // Renamed variables through var_name_to_prev_var_name.
  result = warm_start(model_dir.str(),
                      {.ckpt_to_initialize_from = old_dir / "model.ckpt-900.h5",
                       .var_name_to_prev_var_name = {{"classifier/kernel", "head/kernel"}}},
                      model);
  REQUIRE(result.has_value());
  CHECK(result->warm_started.size() == 3);
  CHECK(model.find("classifier/kernel")->value.at({2, 0}) == 3.0);

  // A map key that names no warm-started variable is an error, as in TensorFlow.
  model = new_model();
  CHECK_THROWS_AS(warm_start(model_dir.str(),
                             {.ckpt_to_initialize_from = old_dir.str(),
                              .vars_to_warm_start = "encoder",
                              .var_name_to_prev_var_name = {{"classifier/kernel", "head/kernel"}}},
                             model),
                  InvalidArgumentError);
  // Shape mismatches name both names and shapes.
  model.find("classifier/kernel")->value = Tensor::zeros({4, 1});
  message = message_of([&] {
    warm_start(model_dir.str(),
               {.ckpt_to_initialize_from = old_dir.str(),
                .var_name_to_prev_var_name = {{"classifier/kernel", "head/kernel"}}},
               model);
  });
  CHECK(message.find("\"classifier/kernel\" is float32 [4, 1] in the model but \"head/kernel\" "
                     "is float32 [3, 1]") != std::string::npos);
  CHECK_THROWS_AS(
      warm_start(model_dir.str(),
                 {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = "("}, model),
      InvalidArgumentError);

  // Once the model directory has a checkpoint of its own, warm start does nothing.
  model = new_model();
  CheckpointManager({.directory = model_dir.str(), .async = false}).save(model);
  CHECK_FALSE(
      warm_start(model_dir.str(), {.ckpt_to_initialize_from = old_dir.str()}, model).has_value());
  CHECK(model.find("encoder/dense/kernel")->value.at({0, 0}) == 0.0);
}
