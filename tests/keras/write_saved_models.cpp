// Writes the files the Keras layout check reads (check_keras_layout.py) into argv[1]: a trained
// Sequential (Adam) and an untrained two-input functional model (SGD with momentum), each as
// <name>.keras, <name>.h5 and <name>.weights.h5.
#define DOCTEST_CONFIG_DISABLE  // saving_util.h is shared with the doctest suite
#include <cstdio>
#include <filesystem>

#include "keras/keras.h"
#include "tests/keras/saving_util.h"

using namespace saving_test;

namespace {

void save_all(K::Model& model, const std::filesystem::path& out, const std::string& name) {
  model.save((out / (name + ".keras")).string());
  model.save((out / (name + ".h5")).string());
  model.save_weights((out / (name + ".weights.h5")).string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  auto sequential = small_model(false, (out / "sequential_dir").string(), 1);
  sequential->compile({.optimizer = K::optimizers::Adam(),
                       .loss = K::losses::SparseCategoricalCrossentropy(true),
                       .metrics = {"accuracy"}});
  sequential->fit(blobs(64, 16), {.epochs = 1, .verbose = 0});
  save_all(*sequential, out, "sequential");

  K::KerasTensor a = K::Input({6}, "a");
  K::KerasTensor b = K::Input({4}, "b");
  K::KerasTensor joined = (*L::Concatenate())(std::vector<K::KerasTensor>{a, b});
  K::KerasTensor hidden = (*L::Dense({.units = 5, .activation = "relu"}))(joined);
  K::Model functional({a, b}, {(*L::Dense({.units = 2}))(hidden)}, "two_inputs");
  functional.config().model_dir = (out / "functional_dir").string();
  functional.compile({.optimizer = K::optimizers::SGD({.momentum = 0.9}),
                      .loss = "sparse_categorical_crossentropy"});
  save_all(functional, out, "functional");
  return 0;
}
