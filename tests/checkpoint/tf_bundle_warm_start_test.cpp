// Starting from TensorFlow's checkpoints: warm start (warm_starting_util.py) and
// initializer_from_checkpoint (checkpoint_utils.init_from_checkpoint) read a TF prefix, a
// directory whose state file names one, or a SavedModel directory as they read est's, through
// open_checkpoint (checkpoint/source.h); TF1's slot names are est's; a missing tensor and a
// shape mismatch are errors naming both sides.
#include <doctest/doctest.h>

#include <fstream>

#include "checkpoint/checkpoint.h"
#include "helpers.h"
#include "tf_bundle_helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;
using est::testing::TempDir;

namespace {

Tensor init_value(const std::string& path, const std::string& name, const Shape& shape) {
  ops::Generator generator(0);
  return initializer_from_checkpoint(path, name)(shape, DType::kF32, generator);
}

}  // namespace

TEST_CASE("initializer_from_checkpoint reads TF Serving's half_plus_three: prefix or SavedModel") {
  const std::string saved_model = fixture("half_plus_three");
  CHECK(init_value(saved_model, "a", {}).data<float>()[0] == 0.5f);
  CHECK(init_value(saved_model + "/variables/variables", "b", {}).data<float>()[0] == 3.0f);
  CHECK(init_value(saved_model + "/variables/variables.index", "a", {}).data<float>()[0] == 0.5f);
  // A model directory whose `checkpoint` state file names a TF prefix.
  ScratchCopy copy("half_plus_three");
  CheckpointState state;
  state.model_checkpoint_path = "variables";
  write_checkpoint_state((copy.dir / "variables").string(), state);
  CHECK(init_value((copy.dir / "variables").string(), "c", {}).data<float>()[0] == 3.0f);

  CHECK_THROWS_WITH_AS(init_value(saved_model, "a", {2, 2}),
                       doctest::Contains("tensor 'a' of checkpoint"), InvalidArgumentError);
  try {
    init_value(saved_model, "a", {2, 2});
  } catch (const InvalidArgumentError& error) {
    CHECK(std::string(error.what()).find("float32 []") != std::string::npos);
    CHECK(std::string(error.what()).find("float32 [2, 2]") != std::string::npos);
  }
  const std::string missing =
      "\"embedding\" is not in TensorFlow checkpoint " + saved_model + "/variables/variables";
  CHECK_THROWS_WITH_AS(init_value(saved_model, "embedding", {}), doctest::Contains(missing.c_str()),
                       NotFoundError);
}

TEST_CASE("warm start from a TF1 checkpoint: variables by name, renamed, and TF1's slot names") {
  ScratchCopy copy("half_plus_three");
  BundleBuilder tf;
  tf.add_f32("dnn/hiddenlayer_0/kernel", {2, 2}, {1, 2, 3, 4});
  tf.add_f32("dnn/hiddenlayer_0/kernel/Adagrad", {2, 2}, {0.5f, 0.6f, 0.7f, 0.8f});
  tf.add_f32("old_logits/bias", {1}, {-1.5f});
  tf.add_f32("old_logits/bias/Adagrad", {1}, {9});
  tf.add_f32("linear/w/Ftrl", {1}, {2});
  tf.add_f32("linear/w/Ftrl_1", {1}, {-3});
  tf.write(copy.prefix());

  TempDir model_dir;
  TensorBundle model;
  model.add_variable("dnn/hiddenlayer_0/kernel", Tensor::zeros({2, 2}));
  model.add_variable("dnn/logits/bias", Tensor::zeros({1}));
  auto result = warm_start(
      model_dir.str(),
      {.ckpt_to_initialize_from = copy.dir.string(),  // a SavedModel directory
       .vars_to_warm_start = {"dnn/", "linear/"},
       .var_name_to_prev_var_name = {{"dnn/logits/bias", "old_logits/bias"},
                                     {"dnn/logits/bias/Adagrad", "old_logits/bias/Adagrad"}}},
      model);
  REQUIRE(result);
  CHECK(result->path == copy.prefix());
  CHECK(model.find("dnn/hiddenlayer_0/kernel")->value.to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4});
  CHECK(model.find("dnn/logits/bias")->value.to_vector<float>() == std::vector<float>{-1.5f});
  std::map<std::string, std::vector<float>> staged;
  for (const auto& [name, value] : result->staged) staged[name] = value.to_vector<float>();
  CHECK(staged == std::map<std::string, std::vector<float>>{
                      {"dnn/hiddenlayer_0/kernel/Adagrad", {0.5f, 0.6f, 0.7f, 0.8f}},
                      {"dnn/logits/bias/Adagrad", {9}},
                      {"linear/w/Ftrl", {2}},
                      {"linear/w/Ftrl_1", {-3}}});
}

TEST_CASE("warm start from a TF checkpoint: a missing tensor and a shape mismatch name both") {
  const std::string prefix = fixture("half_plus_three") + "/variables/variables";
  TempDir model_dir;
  TensorBundle model;
  model.add_variable("x", Tensor::zeros({3}));
  const std::string missing = "Warm start from " + prefix +
                              ": variable \"x\" (looked up as \"x\") is not in the checkpoint";
  CHECK_THROWS_WITH_AS(warm_start(model_dir.str(), {.ckpt_to_initialize_from = prefix}, model),
                       doctest::Contains(missing.c_str()), NotFoundError);
  CHECK_THROWS_WITH_AS(
      warm_start(model_dir.str(),
                 {.ckpt_to_initialize_from = prefix, .var_name_to_prev_var_name = {{"x", "a"}}},
                 model),
      doctest::Contains("\"x\" is float32 [3] in the model but \"a\" is float32 "
                        "[] in the checkpoint"),
      InvalidArgumentError);
  CHECK(model.find("x")->value.to_vector<float>() == std::vector<float>{0, 0, 0});
  // The real file: "a" of TF Serving's half_plus_three, renamed.
  TensorBundle scalar;
  scalar.add_variable("half/a", Tensor::zeros({}));
  warm_start(model_dir.str(),
             {.ckpt_to_initialize_from = prefix, .var_name_to_prev_var_name = {{"half/a", "a"}}},
             scalar);
  CHECK(scalar.find("half/a")->value.data<float>()[0] == 0.5f);
}

TEST_CASE("warm start from a TF checkpoint remaps a vocabulary (testWarmStartVarWithVocab)") {
  // TF's warm_starting_util_test.py, testWarmStartVarWithVocab, with the old weights in a
  // TensorFlow bundle: rows follow the new vocabulary, a new word gets the initializer's zero.
  ScratchCopy copy("half_plus_three");
  BundleBuilder tf;
  tf.add_f32("fruit_weights", {4, 1}, {0.5f, 1, 1.5f, 2});
  tf.write(copy.prefix());
  auto write_vocab = [&](const std::string& name, const std::vector<std::string>& words) {
    const std::string path = (copy.dir / name).string();
    std::ofstream out(path);
    for (const std::string& word : words) out << word << "\n";
    return path;
  };
  const std::string old_vocab = write_vocab("old_vocab", {"apple", "banana", "guava", "orange"});
  const std::string new_vocab =
      write_vocab("new_vocab", {"orange", "guava", "banana", "apple", "raspberry"});
  TempDir model_dir;
  TensorBundle model;
  model.add_variable("fruit_weights", Tensor::zeros({5, 1}));
  auto result = warm_start(model_dir.str(),
                           {.ckpt_to_initialize_from = copy.prefix(),
                            .var_name_to_vocab_info = {{"fruit_weights",
                                                        {.new_vocab = new_vocab,
                                                         .new_vocab_size = 5,
                                                         .old_vocab = old_vocab}}}},
                           model);
  REQUIRE(result);
  CHECK(result->warm_started == std::vector<std::string>{"fruit_weights"});
  CHECK(model.find("fruit_weights")->value.to_vector<float>() ==
        std::vector<float>{2, 1.5f, 1, 0.5f, 0});
}
