// model_to_estimator with checkpoint_format "checkpoint" (TF2's default, keras_lib.py's
// _save_first_checkpoint with save_object_ckpt): model_dir/keras/keras_model.ckpt holds the
// model under TF2's object-based keys, laid out as a Keras-written checkpoint of the same layers
// (testdata/keras_tf_ckpt, README.md there), the estimator starts from it and trains as with
// "saver"; a Keras-written checkpoint already in model_dir/keras is where the estimator starts.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <set>

#include "checkpoint/source.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_object_graph.h"
#include "estimator/estimator.h"
#include "keras/keras.h"
#include "keras/object_checkpoint.h"
#include "ops/error.h"

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = fs::path(EST_SOURCE_ROOT) / "tests/keras/testdata/keras_tf_ckpt";

struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "keras_m2e_object_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// `features` columns, 3 classes (or one 0/1 column when `binary`) from fixed projections.
data::Dataset problem(int64_t n, int64_t features, bool binary, uint32_t seed, int64_t batch) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n * features));
  for (auto& v : x) v = normal(rng);
  data::Features f{{"x", Tensor::from_vector(x, {n, features})}};
  if (binary) {
    std::vector<float> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      y[static_cast<size_t>(i)] = x[static_cast<size_t>(i * features)] > 0;
    return data::Dataset::from_tensor_slices(f, Tensor::from_vector(y, {n, 1})).batch(batch);
  }
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int64_t j = 0; j < features; ++j)
      s[j % 3] += x[static_cast<size_t>(i * features + j)] * (j < 4 ? 1.f : -0.5f);
    y[static_cast<size_t>(i)] = std::max_element(s, s + 3) - s;
  }
  return data::Dataset::from_tensor_slices(f, Tensor::from_vector(y, {n})).batch(batch);
}

InputFn input_fn(data::Dataset dataset) {
  return [dataset](ModeKeys, const InputContext*) { return dataset; };
}

// The fixture's model: Dense(80, relu) on 38 features, Dense(30, relu), Dense(1, sigmoid), Adam.
std::unique_ptr<K::Sequential> charity_model(const std::string& model_dir,
                                             const std::string& first_name = "dense_7") {
  auto model = std::make_unique<K::Sequential>(
      std::vector<K::LayerPtr>{L::InputLayer({.shape = {38}}),
                               L::Dense({.units = 80, .activation = "relu", .name = first_name}),
                               L::Dense({.units = 30, .activation = "relu", .name = "dense_8"}),
                               L::Dense({.units = 1, .activation = "sigmoid", .name = "dense_9"})});
  model->config().model_dir = model_dir;
  model->compile({.optimizer = "adam", .loss = "binary_crossentropy", .metrics = {"accuracy"}});
  return model;
}

std::string object_graph_bytes(const checkpoint::TfBundleReader& reader) {
  return reader.load_variable(checkpoint::kTfObjectGraphKey).data<std::string>()[0];
}

}  // namespace

TEST_CASE(
    "model_to_estimator checkpoint_format \"checkpoint\" (the default): keras/keras_model.ckpt "
    "under TF2's object keys; trains and evaluates as \"saver\"") {
  K::clear_session();
  TempDir keras_dir, object_dir, saver_dir;
  K::Sequential model({L::InputLayer({.shape = {8}}), L::Dense({.units = 16, .activation = "relu"}),
                       L::Dense({.units = 3})});
  model.config().model_dir = keras_dir.path.string();
  model.config().tf_random_seed = 3;
  model.compile({.optimizer = K::optimizers::Adam({.learning_rate = 0.01}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  model.fit(problem(320, 8, false, 1, 32), {.verbose = 0});
  std::vector<Tensor> weights = model.get_weights();

  Estimator object = K::model_to_estimator(model, {.model_dir = object_dir.path.string()});
  Estimator saver = K::model_to_estimator(
      model, {.model_dir = saver_dir.path.string(), .checkpoint_format = "saver"});

  // TF's file, under TF2's keys; "saver" writes none here.
  auto state = checkpoint::read_checkpoint_state((object_dir.path / "keras").string());
  REQUIRE(state);
  CHECK(state->model_checkpoint_path == "keras_model.ckpt");
  CHECK_FALSE(fs::exists(saver_dir.path / "keras"));
  const std::string prefix = (object_dir.path / "keras" / "keras_model.ckpt").string();
  checkpoint::TfBundleReader reader(prefix);
  std::set<std::string> keys;
  for (const auto& info : reader.list_variables()) keys.insert(info.name);
  std::set<std::string> expected{"_CHECKPOINTABLE_OBJECT_GRAPH",
                                 "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE"};
  for (const char* hyper : {"iter", "beta_1", "beta_2", "decay", "learning_rate"})
    expected.insert(std::string("optimizer/") + hyper + "/.ATTRIBUTES/VARIABLE_VALUE");
  for (const char* layer : {"layer_with_weights-0", "layer_with_weights-1"})
    for (const char* weight : {"kernel", "bias"}) {
      std::string path = std::string(layer) + "/" + weight;
      expected.insert(path + "/.ATTRIBUTES/VARIABLE_VALUE");
      for (const char* slot : {"m", "v"})
        expected.insert(path + "/.OPTIMIZER_SLOT/optimizer/" + slot +
                        "/.ATTRIBUTES/VARIABLE_VALUE");
    }
  CHECK(keys == expected);
  CHECK(reader.load_variable("layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE")
            .to_vector<float>() == weights[0].to_vector<float>());
  CHECK(reader.load_variable("layer_with_weights-1/bias/.ATTRIBUTES/VARIABLE_VALUE")
            .to_vector<float>() == weights[3].to_vector<float>());
  Tensor iter = reader.load_variable("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE");
  CHECK(iter.dtype() == DType::kI64);
  CHECK(iter.item() == 0);
  CHECK(reader.load_variable("optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE").item() ==
        doctest::Approx(0.01));
  CHECK(reader.load_variable("estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE").item() == 0);
  // By est's names through the object graph (TF1's slot names for the slots).
  auto source = checkpoint::open_checkpoint(prefix);
  CHECK(source->read("dense_1/kernel").to_vector<float>() == weights[2].to_vector<float>());
  CHECK(source->read("global_step").item() == 0);
  CHECK(source->read("dense/kernel/Adam_1").shape() == ops::Shape{8, 16});

  // The estimator starts from it: the same as "saver", step by step.
  CHECK(object.get_variable_value("dense/kernel").to_vector<float>() ==
        weights[0].to_vector<float>());
  data::Dataset eval_data = problem(100, 8, false, 2, 32);
  Metrics a = object.evaluate(input_fn(eval_data)), b = saver.evaluate(input_fn(eval_data));
  CHECK(a.at("loss") == b.at("loss"));
  CHECK(a.at("accuracy") == b.at("accuracy"));
  object.train(input_fn(problem(320, 8, false, 1, 32).repeat()), {.steps = 20});
  saver.train(input_fn(problem(320, 8, false, 1, 32).repeat()), {.steps = 20});
  a = object.evaluate(input_fn(eval_data));
  b = saver.evaluate(input_fn(eval_data));
  CHECK(a.at("global_step") == 20);
  CHECK(a.at("loss") == b.at("loss"));
  for (const char* name : {"dense/kernel", "dense_1/bias"})
    CHECK(object.get_variable_value(name).to_vector<float>() ==
          saver.get_variable_value(name).to_vector<float>());
  CHECK(object.get_variable_value("dense/kernel").to_vector<float>() !=
        weights[0].to_vector<float>());
}

TEST_CASE("the object-based checkpoint est writes is laid out as the one Keras wrote") {
  K::clear_session();
  TempDir keras_dir, out;
  auto model = charity_model(keras_dir.path.string());
  checkpoint::TfBundleReader keras(kFixture.string());
  const std::string prefix = (out.path / "cp.ckpt").string();
  auto keys = K::write_object_checkpoint(
      prefix, *model,
      {.weights = model->get_weights(), .learning_rate = 0.001, .iterations = 80400});
  checkpoint::TfBundleReader ours(prefix);
  auto theirs = keras.list_variables(), mine = ours.list_variables();
  REQUIRE(mine.size() == theirs.size());
  CHECK(keys.size() == theirs.size());
  for (size_t i = 0; i < theirs.size(); ++i) {
    CAPTURE(theirs[i].name);
    CHECK(mine[i].name == theirs[i].name);
    CHECK(keys[i] == theirs[i].name);
    CHECK(mine[i].dtype_name == theirs[i].dtype_name);
    CHECK(mine[i].shape == theirs[i].shape);
  }
  // The object graph, byte for byte: nodes breadth first, the same names, slots in Keras's order.
  CHECK(object_graph_bytes(ours) == object_graph_bytes(keras));
  CHECK(ours.load_variable("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE").item() == 80400);
}

TEST_CASE("model_to_estimator starts from a Keras-written checkpoint in model_dir/keras") {
  K::clear_session();
  TempDir keras_dir, est_dir;
  fs::create_directories(est_dir.path / "keras");
  for (const char* file : {"checkpoint", "cp.ckpt.index", "cp.ckpt.data-00000-of-00001"})
    fs::copy_file(kFixture / file, est_dir.path / "keras" / file);
  auto model = charity_model(keras_dir.path.string());
  Estimator estimator = K::model_to_estimator(*model, {.model_dir = est_dir.path.string()});
  CHECK_FALSE(fs::exists(est_dir.path / "keras" / "keras_model.ckpt.index"));
  checkpoint::TfBundleReader keras(kFixture.string());
  std::vector<Tensor> stored;
  for (int layer = 0; layer < 3; ++layer)
    for (const char* weight : {"kernel", "bias"})
      stored.push_back(keras.load_variable(
          fmt::format("layer_with_weights-{}/{}/.ATTRIBUTES/VARIABLE_VALUE", layer, weight)));
  CHECK(estimator.get_variable_value("dense_7/kernel").to_vector<float>() ==
        stored[0].to_vector<float>());
  CHECK(estimator.get_variable_value("dense_9/bias").to_vector<float>() ==
        stored[5].to_vector<float>());
  // Evaluates as the Keras model holding those weights.
  model->set_weights(stored);
  data::Dataset eval_data = problem(96, 38, true, 4, 32);
  auto expected = model->evaluate(eval_data, {.verbose = 0});
  Metrics metrics = estimator.evaluate(input_fn(eval_data));
  CHECK(metrics.at("loss") == doctest::Approx(expected.at("loss")).epsilon(1e-6));
  CHECK(metrics.at("accuracy") == doctest::Approx(expected.at("accuracy")).epsilon(1e-6));

  // A model whose variables the checkpoint lacks: TF's warm-start error, naming them.
  K::clear_session();
  TempDir other_keras, other_est;
  fs::create_directories(other_est.path / "keras");
  for (const char* file : {"checkpoint", "cp.ckpt.index", "cp.ckpt.data-00000-of-00001"})
    fs::copy_file(kFixture / file, other_est.path / "keras" / file);
  auto renamed = charity_model(other_keras.path.string(), "first");
  CHECK_THROWS_WITH_AS(
      K::model_to_estimator(*renamed, {.model_dir = other_est.path.string()}),
      doctest::Contains("The following variables were missing: ['first/bias', 'first/kernel']"),
      InvalidArgumentError);
}

TEST_CASE(
    "model_to_estimator \"checkpoint\" with Adagrad: its accumulators at their initial value") {
  K::clear_session();
  TempDir keras_dir, est_dir;
  K::Sequential model({L::InputLayer({.shape = {8}}), L::Dense({.units = 3})});
  model.config().model_dir = keras_dir.path.string();
  model.compile({.optimizer = K::optimizers::Adagrad({.initial_accumulator_value = 0.25}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true)});
  Estimator estimator = K::model_to_estimator(model, {.model_dir = est_dir.path.string()});
  const std::string prefix = (est_dir.path / "keras" / "keras_model.ckpt").string();
  checkpoint::TfBundleReader reader(prefix);
  std::set<std::string> keys;
  for (const auto& info : reader.list_variables()) keys.insert(info.name);
  CHECK(keys == std::set<std::string>{
                    "_CHECKPOINTABLE_OBJECT_GRAPH",
                    "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE",
                    "layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE",
                    "layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/accumulator/.ATTRIBUTES/"
                    "VARIABLE_VALUE",
                    "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE",
                    "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/accumulator/"
                    ".ATTRIBUTES/VARIABLE_VALUE",
                    "optimizer/decay/.ATTRIBUTES/VARIABLE_VALUE",
                    "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE",
                    "optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE"});
  // TF1's slot name through the object graph, holding initial_accumulator_value.
  auto source = checkpoint::open_checkpoint(prefix);
  std::vector<float> accumulator = source->read("dense/kernel/Adagrad").to_vector<float>();
  REQUIRE(accumulator.size() == 24);
  CHECK(accumulator[0] == 0.25f);
  CHECK(accumulator[23] == 0.25f);
  estimator.train(input_fn(problem(64, 8, false, 1, 32).repeat()), {.steps = 2});
  CHECK(estimator.get_variable_value("global_step").item() == 2);
}
