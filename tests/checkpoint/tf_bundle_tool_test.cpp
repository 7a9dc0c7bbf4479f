// est-ckpt on TensorFlow's own checkpoints: the listing of TensorFlow's inspect_checkpoint
// (`name (DT_FLOAT) [shape]`, sorted; a TF2 checkpoint's variable names after its keys), for a
// SavedModel directory and a prefix, partitioned variables shown whole; a damaged index is an error
// naming the file, exit status 1.
#include "helpers.h"
#include "tf_bundle_helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;

namespace {

#ifndef EST_TEST_CKPT_TOOL
#error "EST_TEST_CKPT_TOOL must name the est-ckpt executable"
#endif

est::testing::CommandResult tool(const std::string& arguments) {
  REQUIRE_MESSAGE(fs::exists(EST_TEST_CKPT_TOOL), "build the est-ckpt target first");
  return est::testing::run_command(std::string(EST_TEST_CKPT_TOOL) + " " + arguments);
}

}  // namespace

TEST_CASE("est-ckpt lists a TensorFlow checkpoint as inspect_checkpoint does") {
  est::testing::CommandResult result = tool(fixture("half_plus_two_tf2_cpu"));
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output ==
        "_CHECKPOINTABLE_OBJECT_GRAPH (DT_STRING) []\n"
        "a/.ATTRIBUTES/VARIABLE_VALUE (DT_FLOAT) []\n"
        "b/.ATTRIBUTES/VARIABLE_VALUE (DT_FLOAT) []\n"
        "c/.ATTRIBUTES/VARIABLE_VALUE (DT_FLOAT) []\n"
        "# variables by name (the object graph's full names):\n"
        "# a -> a/.ATTRIBUTES/VARIABLE_VALUE\n"
        "# b -> b/.ATTRIBUTES/VARIABLE_VALUE\n"
        "# c -> c/.ATTRIBUTES/VARIABLE_VALUE\n");
  // A tensor by its variable's name.
  result = tool(fixture("half_plus_two_tf2_cpu") + " b");
  CHECK(result.output == "b float32 []  min 2 max 2 mean 2\n2\n");
  result = tool(fixture("half_plus_three") + "/variables/variables");
  CHECK(result.exit_code == 0);
  CHECK(result.output == "a (DT_FLOAT) []\nb (DT_FLOAT) []\nc (DT_FLOAT) []\n");

  ScratchCopy copy("half_plus_three");
  BundleBuilder bundle;
  bundle.add_partitioned_f32("dnn/hiddenlayer_0/kernel", {4, 3}, std::vector<float>(12, 0.5f),
                             {{{0, 2}, {0, -1}}, {{2, 2}, {0, -1}}});
  bundle.add_f32("global_step_like", {2}, {1, 2});
  bundle.write(copy.prefix());
  result = tool(copy.prefix());
  CHECK(result.exit_code == 0);
  CHECK(result.output ==
        "dnn/hiddenlayer_0/kernel (DT_FLOAT) [4,3]\nglobal_step_like (DT_FLOAT) [2]\n");

  write_bytes(copy.index(), "not an index");
  result = tool(copy.prefix());
  CHECK(result.exit_code == 1);
  CHECK(result.output.find(copy.index()) != std::string::npos);
}

TEST_CASE("est-ckpt prints a TensorFlow checkpoint's tensor: floats exactly, strings quoted") {
  est::testing::CommandResult result = tool(fixture("half_plus_three") + " a");
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output == "a float32 []  min 0.5 max 0.5 mean 0.5\n0.5\n");

  ScratchCopy copy("half_plus_three");
  BundleBuilder bundle;
  const float third = 1.0f / 3.0f;  // 9 significant digits: 0.333333343
  bundle.add_f32("w", {2}, {third, 2.0f});
  bundle.add_strings("vocab", {3}, {"apple", "two words", "tab\there"});
  bundle.write(copy.prefix());
  result = tool(copy.prefix() + " w");
  CHECK(result.exit_code == 0);
  CHECK(result.output.substr(result.output.find('\n') + 1) == "0.333333343 2\n");
  CHECK(std::strtof("0.333333343", nullptr) == third);
  result = tool(copy.prefix() + " vocab");
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output == "vocab string [3]\n\"apple\" \"two words\" \"tab\\there\"\n");
}

TEST_CASE("est-ckpt --verify checks the TensorFlow checkpoints a model_dir's state file lists") {
  // A TF1 job's model_dir (est resumes from it): before, its prefixes were reported MISSING.
  ScratchCopy copy("half_plus_three");
  const std::string dir = (copy.dir / "variables").string();
  CheckpointState state;
  state.model_checkpoint_path = "variables";
  state.all_model_checkpoint_paths = {"variables"};
  write_checkpoint_state(dir, state);
  est::testing::CommandResult result = tool("--verify " + dir);
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output.find("OK       variables (TensorFlow checkpoint)\n") != std::string::npos);
  CHECK(result.output.find("1 checkpoint(s), 0 problem(s)") != std::string::npos);
  {
    std::fstream data(copy.prefix() + ".data-00000-of-00001",
                      std::ios::in | std::ios::out | std::ios::binary);
    char byte = 0;
    data.read(&byte, 1);
    data.seekp(0);
    byte = static_cast<char>(byte ^ 0x40);
    data.write(&byte, 1);
  }
  result = tool("--verify " + dir);
  CHECK(result.exit_code == 1);
  CHECK_MESSAGE(result.output.find("DAMAGED  variables (TensorFlow checkpoint): ") !=
                    std::string::npos,
                result.output);
}
