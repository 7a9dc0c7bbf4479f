// The `checkpoint` state file: TensorFlow's text format both ways (protobuf TextFormat),
// damaged and empty files, latest_checkpoint().
#include <functional>

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
        "all_model_checkpoint_timestamps: 1700000000.25\n"
        "all_model_checkpoint_timestamps: 1700000600.5\n"
        "last_preserved_timestamp: 1699999000\n");
  // Doubles print in their shortest exact form, so timestamps round-trip bit for bit.
  state.all_model_checkpoint_timestamps = {1700000000.123456789, 0.1};
  CheckpointState parsed = parse_checkpoint_state(format_checkpoint_state(state), "test");
  CHECK(parsed.all_model_checkpoint_timestamps == state.all_model_checkpoint_timestamps);
  CHECK(parsed.last_preserved_timestamp == state.last_preserved_timestamp);
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
      "some_future_field: 3\n"
      "# a comment, and an unknown message field\n"
      "future_message { inner: \"x\" }\n";
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

  // As text_format.Merge: a singular field given twice keeps the last value; single quotes
  // and one-line layouts are protobuf text too.
  CheckpointState merged = parse_checkpoint_state(
      "model_checkpoint_path: 'a.h5' model_checkpoint_path: \"b.h5\"", "test");
  CHECK(merged.model_checkpoint_path == "b.h5");
  CHECK(merged.all_model_checkpoint_paths == std::vector<std::string>{"b.h5"});
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
  fails("model_checkpoint_path \"x\"\n", "dir/checkpoint line 1 column 23");
  fails("model_checkpoint_path: \"x\"\nall_model_checkpoint_paths: x\n", "line 2");
  fails("model_checkpoint_path: \"x\"\nall_model_checkpoint_paths: x\n",
        "(\"all_model_checkpoint_paths: x\"): Expected string");
  fails("last_preserved_timestamp: soon\n", "Expected double");
  fails("model_checkpoint_path: \"unterminated\n", "line 1");
}

TEST_CASE("a state file naming no checkpoint is an error naming the file, not a fresh start") {
  // TensorFlow's get_checkpoint_state raises "Invalid checkpoint state" here; treating it as
  // "no checkpoint yet" would restart training at step 0 beside the existing checkpoints.
  auto message = [](const std::string& text) {
    try {
      parse_checkpoint_state(text, "dir/checkpoint");
    } catch (const DataLossError& error) {
      return std::string(error.what());
    }
    FAIL("expected DataLossError for \"", text, "\"");
    return std::string();
  };
  for (const std::string text :
       {"", "\n  \n", "all_model_checkpoint_paths: \"model.ckpt-1.h5\"\n"}) {
    CAPTURE(text);
    std::string what = message(text);
    CHECK(what.find("Invalid checkpoint state loaded from dir/checkpoint") != std::string::npos);
    CHECK(what.find("no model_checkpoint_path") != std::string::npos);
  }
  CHECK(message("").find("the file is empty") != std::string::npos);

  // Through the directory: every reader of the state file reports it, and a manager (what
  // training opens) refuses to start over the checkpoints beside it.
  TempDir dir;
  {
    CheckpointManager manager({.directory = dir.str(), .async = false});
    manager.save(sample_bundle(1));
  }
  std::ofstream(dir / "checkpoint", std::ios::trunc).close();
  REQUIRE(fs::file_size(dir / "checkpoint") == 0);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { read_checkpoint_state(dir.str()); }, [&] { latest_checkpoint(dir.str()); },
           [&] { checkpoint_candidates(dir.str()); },
           [&] {
             TensorBundle model = sample_bundle(0, 5);
             restore_into(dir.str(), model);
           },
           [&] { CheckpointManager manager({.directory = dir.str(), .async = false}); }}) {
    try {
      call();
      FAIL("expected DataLossError");
    } catch (const DataLossError& error) {
      CHECK(std::string(error.what()).find(dir / "checkpoint") != std::string::npos);
      CHECK(std::string(error.what()).find("the file is empty") != std::string::npos);
    }
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"checkpoint", "model.ckpt-1.h5"});
  CHECK(fs::file_size(dir / "checkpoint") == 0);  // left as found
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

TEST_CASE("a state file that is a directory is reported as one, not as an empty file") {
  TempDir dir;
  fs::create_directory(dir / "checkpoint");
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { read_checkpoint_state(dir.str()); }, [&] { latest_checkpoint(dir.str()); },
           [&] { CheckpointManager manager({.directory = dir.str(), .async = false}); }}) {
    try {
      call();
      FAIL("expected FailedPreconditionError");
    } catch (const FailedPreconditionError& error) {
      std::string what = error.what();
      CAPTURE(what);
      CHECK(what.find(dir / "checkpoint") != std::string::npos);
      CHECK(what.find("is a directory") != std::string::npos);
      CHECK(what.find("the file is empty") == std::string::npos);
    }
  }
  CHECK(fs::is_directory(dir / "checkpoint"));  // left as found
}
