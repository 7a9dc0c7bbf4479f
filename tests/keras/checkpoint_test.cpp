// keras::Checkpoint / CheckpointManager: TensorFlow's numbering, state file and max_to_keep;
// restore continuing training exactly; a new manager picking up a directory; errors.
#include <doctest/doctest.h>

#include <filesystem>

#include "checkpoint/state_file.h"
#include "ops/error.h"
#include "tests/keras/saving_util.h"

using namespace saving_test;
namespace fs = std::filesystem;

TEST_CASE("keras CheckpointManager numbers, records and deletes as tf.train.CheckpointManager") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  model->compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  K::Checkpoint checkpoint({.model = model.get(), .optimizer = &*model->optimizer()});
  std::string dir = scratch / "ckpt";
  K::CheckpointManager manager(checkpoint, dir, 2);
  CHECK(!manager.latest_checkpoint());
  CHECK(manager.save() == dir + "/ckpt-1");
  CHECK(manager.save() == dir + "/ckpt-2");
  CHECK(fs::exists(dir + "/ckpt-1.h5"));
  CHECK(manager.save() == dir + "/ckpt-3");
  CHECK(!fs::exists(dir + "/ckpt-1.h5"));  // beyond max_to_keep
  CHECK(manager.checkpoints() == std::vector<std::string>{dir + "/ckpt-2", dir + "/ckpt-3"});
  CHECK(K::latest_checkpoint(dir) == dir + "/ckpt-3");
  auto state = est::checkpoint::read_checkpoint_state(dir);
  REQUIRE(state);
  CHECK(state->model_checkpoint_path == "ckpt-3");
  CHECK(state->all_model_checkpoint_paths == std::vector<std::string>{"ckpt-2", "ckpt-3"});
  CHECK(state->all_model_checkpoint_timestamps.size() == 2);
  CHECK(manager.save(100) == dir + "/ckpt-100");  // an explicit number
  CHECK(checkpoint.save_counter() == 4);

  // Another manager on the directory keeps its list; a plain Checkpoint::save names only its
  // own file in the state file.
  K::Checkpoint other({.model = model.get()});
  K::CheckpointManager again(other, dir, 2);
  CHECK(again.checkpoints() == std::vector<std::string>{dir + "/ckpt-3", dir + "/ckpt-100"});
  CHECK(again.latest_checkpoint() == dir + "/ckpt-100");
  CHECK(other.save(scratch / "plain/model") == scratch / "plain/model-1");
  CHECK(K::latest_checkpoint(scratch / "plain") == scratch / "plain/model-1");

  CHECK_THROWS_AS(K::CheckpointManager(checkpoint, dir, 0), est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(checkpoint.restore(dir + "/ckpt-7"),
                       doctest::Contains("Could not find checkpoint at"), est::NotFoundError);
  CHECK(!K::latest_checkpoint(scratch / "nowhere"));
}

TEST_CASE("keras Checkpoint.restore brings weights and optimizer back: training continues") {
  Scratch scratch;
  auto data = blobs(64, 16);
  K::clear_session();
  auto model = small_model(true, scratch / "m", 4);
  model->compile({.optimizer = K::optimizers::Adam({.learning_rate = 0.01}),
                  .loss = "sparse_categorical_crossentropy"});
  K::Checkpoint checkpoint({.model = model.get(), .optimizer = &*model->optimizer()});
  K::CheckpointManager manager(checkpoint, scratch / "ckpt", 1);
  model->fit(data, {.epochs = 1, .verbose = 0});
  manager.save();
  std::vector<Tensor> saved = model->get_weights();
  model->fit(data, {.epochs = 1, .verbose = 0});
  std::vector<Tensor> second_epoch = model->get_weights();

  checkpoint.restore(*K::latest_checkpoint(scratch / "ckpt"));
  check_close(model->get_weights(), saved, 0);
  CHECK(model->read_state().global_step == 4);
  model->fit(data, {.epochs = 1, .verbose = 0});
  check_close(model->get_weights(), second_epoch, 1e-6);  // the same epoch again

  // Without the optimizer, only the weights come back.
  K::Checkpoint weights_only({.model = model.get()});
  std::string path = weights_only.write(scratch / "weights_only");
  model->fit(data, {.epochs = 1, .verbose = 0});
  int64_t step = model->read_state().global_step;
  weights_only.restore(path);
  check_close(model->get_weights(), second_epoch, 1e-6);
  CHECK(model->read_state().global_step == step);
}
