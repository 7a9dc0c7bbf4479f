// keras compile / fit / evaluate / predict: errors, learning, History, progress lines, the
// functional API against Sequential, and fit's first step against an Estimator model_fn.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <regex>

#include "estimator/estimator.h"
#include "keras/keras.h"
#include "nn/nn.h"
#include "ops/error.h"

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

namespace {

// 10 features, 3 classes: the class is the argmax of three fixed projections (learnable).
struct Problem {
  Tensor x, y;
};
Problem make_problem(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * 10);
  std::vector<int64_t> y(n);
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int j = 0; j < 10; ++j) s[j % 3] += x[i * 10 + j] * (j < 5 ? 1.f : -0.5f);
    y[i] = std::max_element(s, s + 3) - s;
  }
  return {Tensor::from_vector(x, {n, 10}), Tensor::from_vector(y, {n})};
}

data::Dataset dataset_of(const Problem& p, int64_t batch) {
  return data::Dataset::from_tensor_slices(data::Features{{"x", p.x}}, p.y).batch(batch);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "keras_test_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

K::ProgbarOutput capture(std::string& text) {
  K::ProgbarOutput out = K::stdout_output();
  out.write = [&text](const std::string& s) { text += s; };
  out.is_terminal = false;
  return out;
}

std::unique_ptr<K::Sequential> classifier(const std::string& model_dir, uint64_t seed) {
  auto model = std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
      L::InputLayer({.shape = {10}}), L::Dense({.units = 16, .activation = "relu"}),
      L::Dense({.units = 3})});
  model->config().model_dir = model_dir;
  model->config().tf_random_seed = seed;
  return model;
}

}  // namespace

TEST_CASE("keras compile names the valid losses, metrics and optimizers") {
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 1);
  auto& model = *model_ptr;
  CHECK_THROWS_WITH_AS(model.compile({.optimizer = "sgd", .loss = "sparse_crossentropy"}),
                       doctest::Contains("Unknown loss function: 'sparse_crossentropy'. Valid "
                                         "names: 'sparse_categorical_crossentropy'"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(
      model.compile(
          {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"acuracy"}}),
      doctest::Contains("Unknown metric function: 'acuracy'"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(model.compile({.optimizer = "adamw", .loss = "mse"}),
                       doctest::Contains("Unknown optimizer: 'adamw'. Valid names: 'sgd', 'adam'"),
                       InvalidArgumentError);
  CHECK(K::optimizers::Adam().optimizer.name() == "Adam");
}

TEST_CASE("keras compile's default optimizer is Keras's RMSprop, and it trains") {
  // compile() without an optimizer is 'rmsprop' in Keras; before, est had no such name.
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 3);
  auto& model = *model_ptr;
  model.compile({.loss = K::losses::SparseCategoricalCrossentropy(true)});
  CHECK(K::get_optimizer("RMSprop").name == "RMSprop");
  auto problem = make_problem(256, 5);
  K::History history = model.fit(dataset_of(problem, 32), {.epochs = 3, .verbose = 0});
  REQUIRE(history["loss"].size() == 3);
  CHECK(history["loss"][2] < history["loss"][0]);
}

TEST_CASE("keras fit before compile, an infinite dataset and a wrong input shape are errors") {
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 1);
  auto& model = *model_ptr;
  auto problem = make_problem(64, 1);
  CHECK_THROWS_WITH_AS(model.fit(dataset_of(problem, 16)),
                       doctest::Contains("You must compile your model before training/testing"),
                       FailedPreconditionError);
  model.compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
  CHECK_THROWS_WITH_AS(model.fit(dataset_of(problem, 16).repeat(), {.verbose = 0}),
                       doctest::Contains("the dataset is infinite (it ends in repeat()) and "
                                         "steps_per_epoch is not set"),
                       InvalidArgumentError);
  auto wide = make_problem(32, 2);
  wide.x = Tensor::from_vector(std::vector<float>(32 * 12, 0.f), {32, 12});
  CHECK_THROWS_WITH_AS(model.fit(dataset_of(wide, 16), {.verbose = 0}),
                       doctest::Contains("Input 0 of layer \"sequential\" is incompatible with "
                                         "the layer: expected shape=(None, 10), found "
                                         "shape=(16, 12)"),
                       InvalidArgumentError);
}

TEST_CASE("keras fit lowers the loss and returns Keras's History with validation") {
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 7);
  auto& model = *model_ptr;
  model.compile({.optimizer = K::optimizers::Adam({.learning_rate = 0.01}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  auto train = make_problem(512, 3);
  auto val = make_problem(128, 4);
  std::string text;
  K::History history =
      model.fit(dataset_of(train, 32).shuffle(16, 5), {.epochs = 4,
                                                       .validation_data = dataset_of(val, 64),
                                                       .validation_freq = 2,
                                                       .verbose = 2,
                                                       .output = capture(text)});
  REQUIRE(history["loss"].size() == 4);
  REQUIRE(history["accuracy"].size() == 4);
  REQUIRE(history["val_loss"].size() == 2);  // epochs 2 and 4
  CHECK(history.epoch == std::vector<int>{0, 1, 2, 3});
  CHECK(history["loss"][3] < 0.7 * history["loss"][0]);
  CHECK(history["accuracy"][3] > history["accuracy"][0]);
  CHECK(history["val_accuracy"][1] > 0.7);
  CHECK_THROWS_AS(history["mae"], NotFoundError);
  // verbose 2: "Epoch 2/4", then one line per epoch with its times, val_ values when validated.
  std::regex line(
      "Epoch 2/4\n16/16 - \\d+s - loss: \\d\\.\\d{4} - accuracy: \\d\\.\\d{4} - val_loss: "
      "\\d\\.\\d{4} - val_accuracy: \\d\\.\\d{4} - \\d+m?s/epoch - \\d+(ms|us)/step\n");
  CHECK(std::regex_search(text, line));
  auto results = model.evaluate(dataset_of(val, 64), {.verbose = 0});
  CHECK(results.at("loss") == doctest::Approx(history["val_loss"][1]).epsilon(1e-6));
  auto predictions = model.predict(dataset_of(val, 64));
  REQUIRE(predictions.size() == 1);
  CHECK(predictions[0].shape() == ops::Shape{128, 3});
}

TEST_CASE("keras fit with verbose 1 off a terminal prints the final bar line of each epoch") {
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 3);
  auto& model = *model_ptr;
  model.compile({.optimizer = "sgd",
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  std::string text;
  model.fit(dataset_of(make_problem(64, 5), 16).repeat(),
            {.epochs = 2, .steps_per_epoch = 4, .output = capture(text)});
  std::regex expected(
      "Epoch 1/2\n4/4 \\[==============================\\] - \\d+s \\d+(s|ms|us)/step - loss: "
      "\\d\\.\\d{4} - accuracy: \\d\\.\\d{4}\nEpoch 2/2\n4/4 \\[=+\\] - \\d+s \\d+(s|ms|us)/step "
      "- loss: \\d\\.\\d{4} - accuracy: \\d\\.\\d{4}\n");
  CHECK(std::regex_match(text, expected));
}

TEST_CASE("keras callbacks see every batch and epoch with logs") {
  K::clear_session();
  TempDir dir;
  auto model_ptr = classifier(dir.path.string(), 3);
  auto& model = *model_ptr;
  model.compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
  struct Recorder : K::Callback {
    std::vector<std::string> events;
    void on_train_begin(const K::Logs&) override { events.push_back("train_begin"); }
    void on_epoch_begin(int e, const K::Logs&) override {
      events.push_back("epoch_begin " + std::to_string(e));
    }
    void on_train_batch_end(int64_t b, const K::Logs& logs) override {
      events.push_back("batch_end " + std::to_string(b) + (logs.count("loss") ? " loss" : ""));
    }
    void on_epoch_end(int e, const K::Logs& logs) override {
      events.push_back("epoch_end " + std::to_string(e) + (logs.count("loss") ? " loss" : ""));
      if (e == 1) model()->stop_training = true;
    }
    void on_train_end(const K::Logs&) override { events.push_back("train_end"); }
  };
  auto recorder = std::make_shared<Recorder>();
  auto history = model.fit(dataset_of(make_problem(32, 5), 16),
                           {.epochs = 5, .callbacks = {recorder}, .verbose = 0});
  CHECK(recorder->events == std::vector<std::string>{"train_begin", "epoch_begin 0",
                                                     "batch_end 0 loss", "batch_end 1 loss",
                                                     "epoch_end 0 loss", "epoch_begin 1",
                                                     "batch_end 0 loss", "batch_end 1 loss",
                                                     "epoch_end 1 loss", "train_end"});
  CHECK(history["loss"].size() == 2);
  CHECK(recorder->params().at("steps") == 2);
}

TEST_CASE("keras functional model with two inputs equals the same Sequential model") {
  TempDir seq_dir, fn_dir;
  auto problem = make_problem(96, 8);
  K::clear_session();
  K::Sequential seq({L::InputLayer({.shape = {10}}), L::Dense({.units = 3, .name = "dense"})});
  seq.config().model_dir = seq_dir.path.string();
  seq.config().tf_random_seed = 11;
  auto a = K::Input({4}, "a");
  auto b = K::Input({6}, "b");
  auto joined = (*L::Concatenate())({a, b});
  K::Model functional({a, b}, {(*L::Dense({.units = 3, .name = "dense"}))(joined)});
  functional.config().model_dir = fn_dir.path.string();
  functional.config().tf_random_seed = 11;
  for (K::Model* model : {static_cast<K::Model*>(&seq), &functional})
    model->compile({.optimizer = "sgd",
                    .loss = K::losses::SparseCategoricalCrossentropy(true),
                    .metrics = {"accuracy"}});
  Tensor xa = ops::slice(problem.x, {0, 0}, {96, 4});
  Tensor xb = ops::slice(problem.x, {0, 4}, {96, 6});
  auto split =
      data::Dataset::from_tensor_slices(data::Features{{"a", xa}, {"b", xb}}, problem.y).batch(32);
  auto h1 = seq.fit(dataset_of(problem, 32), {.epochs = 2, .verbose = 0});
  auto h2 = functional.fit(split, {.epochs = 2, .verbose = 0});
  CHECK(h1["loss"] == h2["loss"]);
  CHECK(h1["accuracy"] == h2["accuracy"]);
  Tensor p1 = seq.predict(dataset_of(problem, 32))[0];
  Tensor p2 = functional.predict(split)[0];
  CHECK(p1.to_vector<float>() == p2.to_vector<float>());
}

TEST_CASE("keras fit's first step equals an Estimator step of the same model_fn and seed") {
  auto problem = make_problem(64, 9);
  K::clear_session();
  TempDir keras_dir, est_dir;
  auto model_ptr = classifier(keras_dir.path.string(), 21);
  auto& model = *model_ptr;
  model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.1}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true)});
  auto history = model.fit(dataset_of(problem, 64), {.verbose = 0});

  auto model_fn = [](const Features& f, const Tensor& labels, ModeKeys, ModelContext& ctx) {
    Tensor h = nn::dense(ctx, f.at("x"), {.units = 16, .activation = nn::relu});
    Tensor logits = nn::dense(ctx, h, {.units = 3});
    Tensor loss =
        nn::sparse_softmax_cross_entropy(labels, logits, 1.0, nn::Reduction::kSumOverBatchSize);
    return EstimatorSpec::train(loss, optim::sgd(0.1).minimize(loss, ctx));
  };
  struct LossHook : SessionRunHook {
    float loss = 0;
    void after_run(SessionRunContext& context, const SessionRunValues&) override {
      loss = context.spec().loss.to_vector<float>()[0];
    }
  };
  auto hook = std::make_shared<LossHook>();
  Estimator estimator(model_fn,
                      RunConfig{.model_dir = est_dir.path.string(), .tf_random_seed = 21});
  estimator.train([&](ModeKeys, const InputContext*) { return dataset_of(problem, 64); },
                  {.hooks = {hook}});
  CHECK(static_cast<float>(history["loss"][0]) == hook->loss);
  // The same variables after the step, under the same names.
  Estimator reader(model_fn, RunConfig{.model_dir = keras_dir.path.string()});
  for (const char* name : {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"})
    CHECK(estimator.get_variable_value(name).to_vector<float>() ==
          reader.get_variable_value(name).to_vector<float>());
}

TEST_CASE("keras Embedding, Dropout and BatchNormalization train, with non-trainable weights") {
  K::clear_session();
  TempDir dir;
  K::Sequential model({L::InputLayer({.shape = {5}}),
                       L::Embedding({.input_dim = 20, .output_dim = 8}), L::Flatten(),
                       L::Dropout({.rate = 0.2}), L::BatchNormalization(),
                       L::Dense({.units = 1, .activation = "sigmoid"})});
  model.config().model_dir = dir.path.string();
  model.config().tf_random_seed = 5;
  // embedding 20*8; batch_normalization 4*40 (moving_mean and moving_variance not trainable);
  // dense 40 + 1.
  CHECK(model.count_params() == 160 + 160 + 41);
  std::string summary = model.summary();
  CHECK(summary.find("Total params: 361\nTrainable params: 281\nNon-trainable params: 80\n") !=
        std::string::npos);
  CHECK(model.weights().back().first == "batch_normalization/moving_variance");
  // The label is whether id 3 appears among the five ids.
  std::mt19937 rng(2);
  std::vector<float> ids(256 * 5);
  std::vector<float> labels(256);
  for (int i = 0; i < 256; ++i) {
    for (int j = 0; j < 5; ++j) {
      ids[i * 5 + j] = static_cast<float>(rng() % 20);
      if (ids[i * 5 + j] == 3) labels[i] = 1;
    }
  }
  auto dataset =
      data::Dataset::from_tensor_slices(data::Features{{"ids", Tensor::from_vector(ids, {256, 5})}},
                                        Tensor::from_vector(labels, {256}))
          .batch(32);
  model.compile({.optimizer = "adam", .loss = "binary_crossentropy", .metrics = {"accuracy"}});
  auto history = model.fit(dataset, {.epochs = 6, .verbose = 0});
  CHECK(history["loss"].back() < history["loss"].front());
  CHECK(history["accuracy"].back() > 0.8);
}

TEST_CASE("keras fit without a model_dir leaves no files behind; with one, they stay") {
  K::clear_session();
  auto problem = make_problem(64, 4);
  std::filesystem::path temporary;
  {
    auto model = classifier("", 2);
    model->compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
    model->fit(dataset_of(problem, 16), {.epochs = 2, .verbose = 0});
    temporary = model->config().model_dir;
    REQUIRE_FALSE(temporary.empty());
    CHECK(std::filesystem::exists(temporary / "checkpoint"));  // fit's state, while the model lives
    model->fit(dataset_of(problem, 16), {.epochs = 1, .verbose = 0});  // continues from there
    CHECK(std::filesystem::exists(temporary / "checkpoint"));
  }
  CHECK_FALSE(std::filesystem::exists(temporary));
  TempDir dir;
  {
    auto model = classifier(dir.path.string(), 2);
    model->compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
    model->fit(dataset_of(problem, 16), {.epochs = 1, .verbose = 0});
  }
  CHECK(std::filesystem::exists(dir.path / "checkpoint"));  // the user's directory is theirs
}
