// Keras's "Simple MNIST convnet" example (keras.io/examples/vision/mnist_convnet) in C++, on
// Fashion-MNIST from the Debian package: a small convnet written with the functional API (Input,
// Conv2D, MaxPooling2D, Flatten, Dropout, Dense softmax), Adam, categorical crossentropy on
// one-hot labels, fit on tensors with batch_size 128 and validation_split 0.1 (the last 10 % of
// the training rows), then evaluate on the test set.
//
//   keras_mnist_convnet [--epochs N] [--train_samples N] [--test_samples N]
// (--train_samples / --test_samples use the first N rows of each split; 0: all.)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>
#include <utility>

#include <est/est.h>

namespace {

// keras.datasets.mnist.load_data()'s split, first `samples` rows (0: all): uint8 images
// [N, 28, 28] and int64 labels [N].
std::pair<est::Tensor, est::Tensor> load_split(const std::string& prefix, int64_t samples) {
  std::string dir = est::data::kFashionMnistDirectory;
  est::Tensor x = est::data::read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
  est::Tensor y = est::ops::cast(est::data::read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz"),
                                 est::DType::kI64);
  if (samples > 0 && samples < x.dim(0)) {
    x = est::ops::slice(x, {0, 0, 0}, {samples, 28, 28});
    y = est::ops::slice(y, {0}, {samples});
  }
  return {x, y};
}

}  // namespace

int main(int argc, char** argv) try {
  int epochs = 15;
  int64_t train_samples = 0, test_samples = 0;
  CLI::App app("Keras's simple MNIST convnet on Fashion-MNIST.", "keras_mnist_convnet");
  app.add_option("--epochs", epochs, "epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--train_samples", train_samples, "first N training rows (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--test_samples", test_samples, "first N test rows (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  namespace keras = est::keras;
  namespace layers = est::keras::layers;
  using est::ops::cast;
  using est::ops::expand_dims;
  using est::ops::mul;

  // Model / data parameters
  int64_t num_classes = 10;
  est::Shape input_shape = {28, 28, 1};

  // Load the data and split it between train and test sets
  auto [x_train, y_train] = load_split("train", train_samples);
  auto [x_test, y_test] = load_split("t10k", test_samples);

  // Scale images to the [0, 1] range
  x_train = mul(cast(x_train, est::DType::kF32), 1.0 / 255);
  x_test = mul(cast(x_test, est::DType::kF32), 1.0 / 255);
  // Make sure images have shape (28, 28, 1)
  x_train = expand_dims(x_train, -1);
  x_test = expand_dims(x_test, -1);
  fmt::print("x_train shape: {}\n", keras::shape_tuple(x_train.shape()));
  fmt::print("{} train samples\n", x_train.dim(0));
  fmt::print("{} test samples\n", x_test.dim(0));

  // convert class vectors to binary class matrices
  y_train = est::ops::one_hot(y_train, num_classes);
  y_test = est::ops::one_hot(y_test, num_classes);

  // Build the model
  // (layers::X(...) returns the layer as a LayerPtr: (*layer)(x) calls it on a tensor)
  keras::KerasTensor inputs = keras::Input(input_shape);
  keras::KerasTensor x =
      (*layers::Conv2D({.filters = 32, .kernel_size = {3, 3}, .activation = "relu"}))(inputs);
  x = (*layers::MaxPooling2D({.pool_size = {2, 2}}))(x);
  x = (*layers::Conv2D({.filters = 64, .kernel_size = {3, 3}, .activation = "relu"}))(x);
  x = (*layers::MaxPooling2D({.pool_size = {2, 2}}))(x);
  x = (*layers::Flatten())(x);
  x = (*layers::Dropout({.rate = 0.5}))(x);
  keras::KerasTensor outputs = (*layers::Dense({.units = num_classes, .activation = "softmax"}))(x);
  keras::Model model(inputs, outputs);
  model.config().tf_random_seed = 42;
  fmt::print("{}", model.summary());

  // Train the model
  int64_t batch_size = 128;
  model.compile({.optimizer = "adam", .loss = "categorical_crossentropy", .metrics = {"accuracy"}});
  model.fit(x_train, y_train,
            {.epochs = epochs, .batch_size = batch_size, .validation_split = 0.1});

  // Evaluate the trained model
  auto score = model.evaluate(x_test, y_test, {.verbose = 0});
  fmt::print("Test loss: {}\n", score.at("loss"));
  fmt::print("Test accuracy: {}\n", score.at("accuracy"));
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
