// keras layers: names, parameter counts, summary() against Keras's text, shape errors.
#include <doctest/doctest.h>

#include "keras/keras.h"
#include "ops/error.h"

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

namespace {

// The multi-worker tutorial's model.
std::unique_ptr<K::Sequential> tutorial_model() {
  return std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
      L::InputLayer({.shape = {28, 28}}), L::Reshape({28, 28, 1}),
      L::Conv2D({.filters = 32, .kernel_size = 3, .activation = "relu"}), L::Flatten(),
      L::Dense({.units = 128, .activation = "relu"}), L::Dense({.units = 10})});
}

}  // namespace

TEST_CASE("keras layers are named per class as Keras names them") {
  K::clear_session();
  auto model_ptr = tutorial_model();
  auto& model = *model_ptr;
  CHECK(model.name() == "sequential");
  auto layers = model.layers();
  REQUIRE(layers.size() == 5);
  CHECK(layers[0]->name() == "reshape");
  CHECK(layers[1]->name() == "conv2d");
  CHECK(layers[2]->name() == "flatten");
  CHECK(layers[3]->name() == "dense");
  CHECK(layers[4]->name() == "dense_1");
  CHECK(L::MaxPooling2D()->name() == "max_pooling2d");
  CHECK(L::BatchNormalization()->name() == "batch_normalization");
  CHECK(K::Input({3}).node->layer->name() == "input_2");  // the InputLayer above was input_1
  auto second_ptr = tutorial_model();
  auto& second = *second_ptr;
  CHECK(second.name() == "sequential_1");
  CHECK(second.layers()[1]->name() == "conv2d_1");
  K::clear_session();
  CHECK(L::Dense({.units = 1})->name() == "dense");
}

TEST_CASE("keras weights and parameter counts follow Keras's formulas") {
  K::clear_session();
  auto model_ptr = tutorial_model();
  auto& model = *model_ptr;
  auto weights = model.weights();
  REQUIRE(weights.size() == 6);
  CHECK(weights[0].first == "conv2d/kernel");
  CHECK(weights[0].second.shape == ops::Shape{3, 3, 1, 32});
  CHECK(weights[1].first == "conv2d/bias");
  CHECK(weights[2].first == "dense/kernel");
  CHECK(weights[2].second.shape == ops::Shape{26 * 26 * 32, 128});
  CHECK(weights[5].first == "dense_1/bias");
  // conv2d: 3*3*1*32 + 32; dense: 21632*128 + 128; dense_1: 128*10 + 10.
  CHECK(model.count_params() == 320 + 2769024 + 1290);
}

TEST_CASE("keras summary prints Keras 2.x's table for the tutorial model") {
  K::clear_session();
  auto model_ptr = tutorial_model();
  auto& model = *model_ptr;
  const std::string blank(65, ' ');
  std::string expected =
      "Model: \"sequential\"\n"
      "_________________________________________________________________\n"
      " Layer (type)                Output Shape              Param #   \n"
      "=================================================================\n"
      " reshape (Reshape)           (None, 28, 28, 1)         0         \n" +
      blank + "\n" + " conv2d (Conv2D)             (None, 26, 26, 32)        320       \n" + blank +
      "\n" + " flatten (Flatten)           (None, 21632)             0         \n" + blank + "\n" +
      " dense (Dense)               (None, 128)               2769024   \n" + blank + "\n" +
      " dense_1 (Dense)             (None, 10)                1290      \n" + blank + "\n" +
      "=================================================================\n"
      "Total params: 2,770,634\n"
      "Trainable params: 2,770,634\n"
      "Non-trainable params: 0\n"
      "_________________________________________________________________\n";
  CHECK(model.summary() == expected);
}

TEST_CASE("keras functional summary with two inputs has Keras's Connected to column") {
  K::clear_session();
  auto a = K::Input({4}, "a");
  auto b = K::Input({6}, "b");
  auto x = (*L::Concatenate())({a, b});
  auto y = (*L::Dense({.units = 2}))(x);
  K::Model model({a, b}, {y});
  CHECK(model.name() == "model");
  std::string text = model.summary();
  // Keras 2.12's print_row at line length 98, columns [29, 58, 68, 98].
  CHECK(text.find(" Layer (type)                Output Shape                 Param #   Connected to"
                  "                  \n") != std::string::npos);
  CHECK(text.find(" a (InputLayer)              [(None, 4)]                  0         []       "
                  "                     \n") != std::string::npos);
  CHECK(text.find(" concatenate (Concatenate)   (None, 10)                   0         ['a[0][0]',"
                  "                   \n                                                        "
                  "             'b[0][0]']                   \n") != std::string::npos);
  CHECK(text.find("Total params: 22\n") != std::string::npos);
}

TEST_CASE("keras layers reject shapes that do not fit, naming the layer") {
  K::clear_session();
  auto x = K::Input({28, 28});
  CHECK_THROWS_WITH_AS((*L::Conv2D({.filters = 2, .kernel_size = 3}))(x),
                       doctest::Contains("Input 0 of layer \"conv2d\" is incompatible with the "
                                         "layer: expected ndim=4, found ndim=3"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS((*L::Reshape({5, 5}))(x),
                       doctest::Contains("total size of new array must be unchanged"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(L::Dense({.units = 2, .activation = "relu6"}),
                       doctest::Contains("Unknown activation function: 'relu6'"),
                       InvalidArgumentError);
  CHECK_THROWS_AS(K::Sequential().summary(), FailedPreconditionError);
}
