// The `checkpoint` state file: TensorFlow's text format both ways, latest_checkpoint().
#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

TEST_CASE("state file text is TensorFlow's CheckpointState format") {
  CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-200.h5";
  state.all_model_checkpoint_paths = {"model.ckpt-100.h5", "model.ckpt-200.h5"};
  state.all_model_checkpoint_timestamps = {1700000000.25, 1700000600.5};
  state.last_preserved_timestamp = 1699999000;
  CHECK(format_checkpoint_state(state) ==
        "model_checkpoint_path: \"model.ckpt-200.h5\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-100.h5\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-200.h5\"\n"
        "all_model_checkpoint_timestamps: 1700000000.250000\n"
        "all_model_checkpoint_timestamps: 1700000600.500000\n"
        "last_preserved_timestamp: 1699999000.000000\n");
}

TEST_CASE("state files as TensorFlow writes them parse") {
  // As tf.train.CheckpointManager leaves it (protobuf text format, shortest doubles).
  const std::string text =
      "model_checkpoint_path: \"/abs/dir/ckpt-3\"\n"
      "all_model_checkpoint_paths: \"ckpt-2\"\n"
      "all_model_checkpoint_paths: \"/abs/dir/ckpt-3\"\n"
      "all_model_checkpoint_timestamps: 1681234567.891\n"
      "all_model_checkpoint_timestamps: 1.6812346e+09\n"
      "last_preserved_timestamp: 1681234000.5\n"
      "some_future_field: 3\n";
  CheckpointState state = parse_checkpoint_state(text, "test");
  CHECK(state.model_checkpoint_path == "/abs/dir/ckpt-3");
  CHECK(state.all_model_checkpoint_paths == std::vector<std::string>{"ckpt-2", "/abs/dir/ckpt-3"});
  REQUIRE(state.all_model_checkpoint_timestamps.size() == 2);
  CHECK(state.all_model_checkpoint_timestamps[0] == 1681234567.891);
  CHECK(state.all_model_checkpoint_timestamps[1] == 1681234600.0);
  CHECK(state.last_preserved_timestamp == 1681234000.5);
  CHECK(resolve_in_directory("/d", "ckpt-2") == "/d/ckpt-2");
  CHECK(resolve_in_directory("/d", "/abs/dir/ckpt-3") == "/abs/dir/ckpt-3");

  // Escapes round-trip; the newest path is always among the kept ones.
  CheckpointState odd;
  odd.model_checkpoint_path = "we\"ird\\name.h5";
  CheckpointState parsed = parse_checkpoint_state(format_checkpoint_state(odd), "test");
  CHECK(parsed.model_checkpoint_path == odd.model_checkpoint_path);
  CHECK(parsed.all_model_checkpoint_paths == std::vector<std::string>{odd.model_checkpoint_path});
}

TEST_CASE("damaged state files are DataLossError naming the line") {
  auto fails = [](const std::string& text, const std::string& fragment) {
    try {
      parse_checkpoint_state(text, "dir/checkpoint");
      FAIL("expected DataLossError for ", text);
    } catch (const DataLossError& error) {
      CHECK_MESSAGE(std::string(error.what()).find(fragment) != std::string::npos, error.what());
    }
  };
  fails("model_checkpoint_path \"x\"\n", "line 1");
  fails("model_checkpoint_path: \"x\"\nall_model_checkpoint_paths: x\n", "line 2");
  fails("last_preserved_timestamp: soon\n", "expected a number");
}

TEST_CASE("latest_checkpoint reads the state file and checks the file exists") {
  TempDir dir;
  CHECK_FALSE(latest_checkpoint(dir.str()).has_value());
  CHECK(checkpoint_candidates(dir.str()).empty());

  CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-2.h5";
  state.all_model_checkpoint_paths = {"model.ckpt-1.h5", "model.ckpt-2.h5"};
  state.all_model_checkpoint_timestamps = {1, 2};
  write_checkpoint_state(dir.str(), state);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"checkpoint"});
  CHECK_FALSE(latest_checkpoint(dir.str()).has_value());  // the file is not there

  save(dir / "model.ckpt-2.h5", sample_bundle(2));
  CHECK(latest_checkpoint(dir.str()) == dir / "model.ckpt-2.h5");
  CHECK(checkpoint_candidates(dir.str()) ==
        std::vector<std::string>{dir / "model.ckpt-2.h5", dir / "model.ckpt-1.h5"});
  // A directory path resolves to its latest checkpoint.
  CHECK(read_info(dir.str()).global_step == 2);
}
