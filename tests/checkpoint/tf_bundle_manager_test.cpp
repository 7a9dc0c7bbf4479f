// CheckpointManager with tf_checkpoint_format (RunConfig::tf_checkpoint_format): each save also
// writes TensorFlow's bundle beside est's file in the background job, the state file names the
// TensorFlow prefix (where tf.train.latest_checkpoint lands, checked by the independent Python
// reader), est still restores its .h5 with its blobs, and retention deletes all three files,
// also after a restart.
#include "helpers.h"
#include "tf_bundle_helpers.h"

#include "checkpoint/tf_bundle_reader.h"

using namespace est;
using namespace est::checkpoint;
using est::testing::list_dir;
using est::testing::sample_bundle;

TEST_CASE("tf_checkpoint_format: TF's bundle beside est's, named by the state file, retained") {
  est::testing::TempDir dir;
  const CheckpointManagerOptions options{
      .directory = dir.str(), .keep_checkpoint_max = 2, .tf_checkpoint_format = true};
  {
    CheckpointManager manager(options);
    for (int64_t step : {1, 2, 3}) manager.save(sample_bundle(step, 0.5 * step));
    manager.wait();
    CHECK(manager.checkpoints() ==
          std::vector<std::string>{dir / "model.ckpt-2.h5", dir / "model.ckpt-3.h5"});
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"checkpoint",
                                                         "model.ckpt-2.data-00000-of-00001",
                                                         "model.ckpt-2.h5", "model.ckpt-2.index",
                                                         "model.ckpt-3.data-00000-of-00001",
                                                         "model.ckpt-3.h5", "model.ckpt-3.index"});
  const CheckpointState state = *read_checkpoint_state(dir.str());
  CHECK(state.model_checkpoint_path == "model.ckpt-3");
  CHECK(state.all_model_checkpoint_paths ==
        std::vector<std::string>{"model.ckpt-2", "model.ckpt-3"});
  // TensorFlow's reading of the directory lands on the prefix; est's on its own file.
  CHECK(resolve_tf_checkpoint_prefix(dir.str()) == dir / "model.ckpt-3");
  CHECK(latest_checkpoint(dir.str()) == dir / "model.ckpt-3.h5");
  CHECK(checkpoint_candidates(dir.str()) ==
        std::vector<std::string>{dir / "model.ckpt-3.h5", dir / "model.ckpt-2.h5"});
  const TensorBundle expected = sample_bundle(3, 1.5);
  TfBundleReader tf(dir.str());
  for (const TensorEntry& entry : expected.tensors)
    CHECK_MESSAGE(est::testing::same_bytes(tf.load_variable(entry.name), entry.value), entry.name);

  // The independent reader finds the latest checkpoint as tf.train.latest_checkpoint does.
  const est::testing::CommandResult python = est::testing::run_command(fmt::format(
      "/usr/bin/python3 {}/tests/scripts/tf_bundle_read.py {}", EST_SOURCE_ROOT, dir.str()));
  if (python.output.find("No module named") == std::string::npos) {
    CHECK_MESSAGE(python.exit_code == 0, python.output);
    CHECK(python.output.find("latest checkpoint: " + dir / "model.ckpt-3") != std::string::npos);
    CHECK(python.output.find("dense/kernel/Adam_1 float32 [3, 4]") != std::string::npos);
  }

  // est restores its own file, blobs included; a restarted manager keeps retaining by prefix.
  CheckpointManager manager(options);
  TensorBundle into = sample_bundle(0, 9.0);
  REQUIRE(manager.restore(into));
  est::testing::check_same_bundle(expected, into);
  manager.save(sample_bundle(4));
  manager.wait();
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"checkpoint",
                                                         "model.ckpt-3.data-00000-of-00001",
                                                         "model.ckpt-3.h5", "model.ckpt-3.index",
                                                         "model.ckpt-4.data-00000-of-00001",
                                                         "model.ckpt-4.h5", "model.ckpt-4.index"});
}
