// keras weights and saving: get/set_weights against fit, save_weights/load_weights, save and
// load_model in both formats continuing training exactly, the Keras-written fixture, bad files.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "checkpoint/keras_import.h"
#include "keras/saving.h"
#include "keras/zip_archive.h"
#include "ops/array_ops.h"
#include "ops/error.h"
#include "tests/keras/saving_util.h"

using namespace saving_test;
using est::DataLossError;
using est::InvalidArgumentError;
using est::NotFoundError;

namespace {

void compile_adam(K::Model& model) {
  model.compile({.optimizer = K::optimizers::Adam({.learning_rate = 0.01}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
}

void check_resume(bool functional, const std::string& extension) {
  resumes_exactly(functional, extension, compile_adam, "Adam");
}

}  // namespace

TEST_CASE("keras get_weights is what fit starts from; set_weights is what fit continues from") {
  Scratch scratch;
  auto data = blobs(64, 16);
  K::clear_session();
  auto plain = small_model(false, scratch / "plain", 11);
  plain->compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  plain->fit(data, {.epochs = 1, .verbose = 0});
  std::vector<Tensor> after_one = plain->get_weights();
  plain->fit(data, {.epochs = 1, .verbose = 0});

  K::clear_session();
  auto peeked = small_model(false, scratch / "peeked", 11);
  std::vector<Tensor> initial = peeked->get_weights();  // before compile and fit
  REQUIRE(initial.size() == 4);
  CHECK(initial[0].shape() == est::Shape{6, 8});
  peeked->compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  peeked->fit(data, {.epochs = 1, .verbose = 0});
  check_close(peeked->get_weights(), after_one, 0);  // the same seed: the same start

  K::clear_session();
  auto other = small_model(false, scratch / "other", 99);  // another seed
  other->compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  other->set_weights(after_one);
  check_close(other->get_weights(), after_one, 0);
  other->fit(data, {.epochs = 1, .verbose = 0});  // SGD keeps no state: the same second epoch
  check_close(other->get_weights(), plain->get_weights(), 1e-6);

  CHECK_THROWS_WITH_AS(other->set_weights({after_one[0]}),
                       doctest::Contains("with a weight list of length 1, but the model was "
                                         "expecting 4 weights"),
                       InvalidArgumentError);
  std::vector<Tensor> wrong = after_one;
  wrong[1] = Tensor::zeros({5});
  CHECK_THROWS_WITH_AS(other->set_weights(wrong),
                       doctest::Contains("weight 1 (\"dense/bias\") has shape [5], but model"),
                       InvalidArgumentError);
}

TEST_CASE("keras save_weights / load_weights round trip through a .weights.h5 file") {
  Scratch scratch;
  K::clear_session();
  auto source = small_model(true, scratch / "source", 1);
  auto target = small_model(true, scratch / "target", 2);
  source->save_weights(scratch / "w.weights.h5");
  target->load_weights(scratch / "w.weights.h5");
  check_close(target->get_weights(), source->get_weights(), 0);
  CHECK_THROWS_WITH_AS(source->save_weights(scratch / "w.h5"),
                       doctest::Contains("must end in `.weights.h5`"), InvalidArgumentError);
  CHECK_THROWS_AS(target->load_weights(scratch / "missing.weights.h5"), NotFoundError);
}

TEST_CASE("keras load_model continues training exactly: .keras, Sequential") {
  check_resume(false, ".keras");
}
TEST_CASE("keras load_model continues training exactly: .keras, functional") {
  check_resume(true, ".keras");
}
TEST_CASE("keras load_model continues training exactly: .h5, Sequential") {
  check_resume(false, ".h5");
}
TEST_CASE("keras load_model continues training exactly: .h5, functional") {
  check_resume(true, ".h5");
}

TEST_CASE("keras load_model opens a Keras-written .h5 file (Keras 3.10, public repository)") {
  // tests/keras/testdata/README.md says where the file comes from.
  std::string path = std::string(EST_SOURCE_ROOT) + "/tests/keras/testdata/churn_keras310.h5";
  K::clear_session();
  auto model = K::load_model(path);
  CHECK(model->is_sequential());
  REQUIRE(model->layers().size() == 3);
  CHECK(model->weights()[0].second.shape == est::Shape{12, 64});
  CHECK(model->optimizer()->name == "Adam");
  CHECK(model->compile_options()->metrics == std::vector<std::string>{"accuracy"});
  // The weights as the checkpoint module's independent Keras reader sees them.
  auto stored = est::checkpoint::read_keras_h5(path);
  auto weights = model->get_weights();
  REQUIRE(stored.size() == weights.size());
  for (size_t i = 0; i < weights.size(); ++i) check_close({weights[i]}, {stored[i].second}, 0);
  K::H5File file = K::H5File::read(path);
  CHECK(model->read_state().global_step ==
        file.read_dataset("optimizer_weights/adam/iteration").item());
  auto predictions =
      model->predict(est::data::Dataset::from_tensor_slices(
                         est::data::Features{{"x", Tensor::zeros({4, 12})}}, Tensor::zeros({4}))
                         .batch(4));
  CHECK(predictions[0].shape() == est::Shape{4, 1});
  std::filesystem::remove_all(model->model_dir());
}

TEST_CASE("keras load_model opens a Keras-written .keras archive (Keras 3.11.3) and trains on") {
  std::string path = std::string(EST_SOURCE_ROOT) + "/tests/keras/testdata/ann_keras3113.keras";
  K::clear_session();
  auto model = K::load_model(path);
  CHECK(model->is_sequential());
  CHECK(model->optimizer()->name == "Adam");
  CHECK(model->optimizer()->config.at("learning_rate") == doctest::Approx(0.01));
  // The weights and the step as the archive's HDF5 file holds them.
  K::H5File file = [&] {
    for (auto& [name, bytes] : K::read_zip(path))
      if (name == "model.weights.h5") return K::H5File::open(bytes, name);
    throw std::runtime_error("no model.weights.h5");
  }();
  auto weights = model->get_weights();
  REQUIRE(weights.size() == 6);
  for (size_t i = 0; i < weights.size(); ++i) {
    std::string layer = i < 2 ? "dense" : i < 4 ? "dense_1" : "dense_2";
    check_close({weights[i]}, {file.read_dataset(fmt::format("layers/{}/vars/{}", layer, i % 2))},
                0);
  }
  auto state = model->read_state();
  CHECK(state.global_step == file.read_dataset("optimizer/vars/0").item());
  // Adam's first moment of dense/kernel is the archive's optimizer/vars/2.
  check_close({state.find("dense/kernel/Adam")->value}, {file.read_dataset("optimizer/vars/2")}, 0);
  // Training continues from the restored step.
  auto data = est::data::Dataset::from_tensor_slices(
                  est::data::Features{{"x", Tensor::zeros({8, 12})}}, Tensor::zeros({8}))
                  .batch(4);
  model->fit(data, {.epochs = 1, .verbose = 0});
  CHECK(model->read_state().global_step == state.global_step + 2);
  std::filesystem::remove_all(model->model_dir());
}

TEST_CASE("keras load_model names what is wrong with a bad file") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  compile_adam(*model);
  std::string good = scratch / "good.keras";
  model->save(good);

  CHECK_THROWS_WITH_AS(K::load_model(scratch / "absent.keras"),
                       doctest::Contains("File not found: filepath="), NotFoundError);

  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string truncated = scratch / "truncated.keras";
  std::ofstream(truncated, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  CHECK_THROWS_WITH_AS(K::load_model(truncated),
                       doctest::Contains((truncated + " is not a valid .keras archive").c_str()),
                       DataLossError);
  std::string flipped = scratch / "flipped.keras";
  std::string damaged = bytes;
  damaged[damaged.find("\"class_name\"") + 3] ^= 1;  // inside config.json: its CRC fails
  std::ofstream(flipped, std::ios::binary).write(damaged.data(), damaged.size());
  CHECK_THROWS_WITH_AS(K::load_model(flipped),
                       doctest::Contains("\"config.json\" fails its CRC-32 check"), DataLossError);

  auto entries = K::read_zip(good);
  for (auto& [name, content] : entries)
    if (name == "config.json") content.replace(content.find("\"Dense\""), 7, "\"LSTM\"");
  std::string unknown = scratch / "unknown.keras";
  K::write_zip(unknown, entries);
  CHECK_THROWS_WITH_AS(K::load_model(unknown),
                       doctest::Contains("unknown layer class 'LSTM' (layer \"dense"),
                       InvalidArgumentError);

  K::H5File weights_only = K::H5File::create();
  weights_only.create_group("model_weights");
  weights_only.save_as(scratch / "weights_only.h5");
  CHECK_THROWS_WITH_AS(K::load_model(scratch / "weights_only.h5"),
                       doctest::Contains("No model config found in the file at"),
                       InvalidArgumentError);
  std::ofstream(scratch / "text.h5") << "not hdf5";
  CHECK_THROWS_WITH_AS(K::load_model(scratch / "text.h5"), doctest::Contains("is not an HDF5 file"),
                       DataLossError);
}

TEST_CASE("keras load_model rebuilds every supported layer from its config") {
  Scratch scratch;
  K::clear_session();
  auto convnet = std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
      L::InputLayer({.shape = {8, 8}}), L::Reshape({8, 8, 1}),
      L::Conv2D({.filters = 4,
                 .kernel_size = {3, 2},
                 .strides = {1, 2},
                 .padding = "same",
                 .activation = "relu"}),
      L::BatchNormalization({.momentum = 0.9, .epsilon = 0.01}), L::MaxPooling2D({.pool_size = 2}),
      L::Flatten(), L::Dropout({.rate = 0.3}),
      L::Dense({.units = 5, .activation = "softmax", .use_bias = false})});
  K::KerasTensor ids = K::Input({4}, "ids", est::ops::DType::kI64);
  K::KerasTensor dense_in = K::Input({6}, "dense_in");
  K::KerasTensor embedded =
      (*L::Flatten())((*L::Embedding({.input_dim = 10, .output_dim = 3}))(ids));
  K::KerasTensor a = (*L::Dense({.units = 4}))(
      (*L::Concatenate())(std::vector<K::KerasTensor>{embedded, dense_in}));
  K::KerasTensor b = (*L::Dense({.units = 4, .activation = "tanh"}))(dense_in);
  auto functional = std::make_unique<K::Model>(
      std::vector<K::KerasTensor>{ids, dense_in},
      std::vector<K::KerasTensor>{(*L::Add())(std::vector<K::KerasTensor>{a, b})}, "two_way");

  est::data::Dataset images = est::data::Dataset::from_tensor_slices(
      est::data::Features{{"x", Tensor::full({2, 8, 8}, 0.5)}}, Tensor::zeros({2}));
  est::data::Dataset pairs = est::data::Dataset::from_tensor_slices(
      est::data::Features{
          {"ids", Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 9, 8, 7, 6}, {2, 4})},
          {"dense_in", Tensor::full({2, 6}, 0.25)}},
      Tensor::zeros({2}));
  std::vector<std::pair<K::Model*, est::data::Dataset>> cases{{convnet.get(), images.batch(2)},
                                                              {functional.get(), pairs.batch(2)}};
  for (auto& [model, data] : cases) {
    model->config().model_dir = scratch / (model->name() + "_dir");
    for (const char* extension : {".keras", ".h5"}) {
      std::string path = scratch / (model->name() + extension);
      model->save(path);
      K::clear_session();
      auto loaded = K::load_model(path);
      CAPTURE(path);
      CHECK(loaded->summary() == model->summary());  // layers, shapes, parameter counts
      check_close(loaded->predict(data), model->predict(data), 0);
      std::filesystem::remove_all(loaded->model_dir());
    }
  }
}
