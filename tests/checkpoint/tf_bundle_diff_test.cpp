// est-ckpt diff (tools/ckpt_diff.cpp): TensorFlow's checkpoints and est's on either side,
// compared tensor by tensor as `diff` compares files, with diff's exit statuses (0 the same,
// 1 different, 2 trouble).
#include "helpers.h"
#include "tf_bundle_helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;
using est::testing::TempDir;

namespace {

est::testing::CommandResult diff(const std::string& arguments) {
  REQUIRE_MESSAGE(fs::exists(EST_TEST_CKPT_TOOL), "build the est-ckpt target first");
  return est::testing::run_command(std::string(EST_TEST_CKPT_TOOL) + " diff " + arguments);
}

}  // namespace

TEST_CASE("est-ckpt diff: TF Serving's half_plus_three equals est's checkpoint of its values") {
  const std::string tf = fixture("half_plus_three");
  TempDir dir;
  const std::string est_file = dir.str() + "/model.ckpt-1.h5";
  TensorBundle same;
  same.add_variable("a", Tensor::scalar(0.5f)).add_variable("b", Tensor::scalar(3.0f));
  same.add_variable("c", Tensor::scalar(3.0f));
  save(est_file, same);

  est::testing::CommandResult result = diff(tf + " " + est_file);
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output == "A: " + tf + "/variables/variables\nB: " + est_file +
                             "\n3 tensor(s) equal, 0 only in A, 0 only in B, 0 of another dtype "
                             "or shape, 0 with other values: the same\n");
  CHECK(diff(tf + " " + tf).exit_code == 0);
}

TEST_CASE("est-ckpt diff lists what is only in A or B, another shape, and other values") {
  TempDir dir;
  const std::string est_file = dir.str() + "/model.ckpt-1.h5";
  TensorBundle other;
  other.add_variable("a", Tensor::scalar(0.5f)).add_variable("b", Tensor::scalar(2.5f));
  other.add_variable("c", Tensor::from_vector<float>({3, 3}));
  other.add_variable("d", Tensor::from_vector<int64_t>({1, 2, 3}));
  save(est_file, other);
  const std::string tf = fixture("half_plus_three") + "/variables/variables";

  est::testing::CommandResult result = diff(est_file + " " + tf);
  CHECK(result.exit_code == 1);
  CHECK(result.output ==
        "~ b  float32 []: 1 of 1 values differ, max abs difference 0.5\n"
        "! c  float32 [2] in A, float32 [] in B\n"
        "< d  int64 [3]  (only in A)\n"
        "A: " +
            est_file + "\nB: " + tf +
            "\n1 tensor(s) equal, 1 only in A, 0 only in B, 1 of another dtype or shape, 1 with "
            "other values: different\n");

  // Two TensorFlow checkpoints, one object-based (TF2, read by its variables' names): TF
  // Serving's half_plus_two in both forms.
  result = diff(fixture("half_plus_two_tf2_cpu") + " " + fixture("half_plus_two_cpu"));
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("> a2  float32 []  (only in B)\n") != std::string::npos);
  CHECK(result.output.find("3 tensor(s) equal") != std::string::npos);

  // Values: 2 of 4 differ, the largest by 1.5; strings counted (TensorFlow's on both sides:
  // est's checkpoints hold no strings).
  ScratchCopy left_copy("half_plus_three"), right_copy("half_plus_three");
  BundleBuilder left, right;
  left.add_f32("w", {2, 2}, {1, 2, 3, 4});
  left.add_strings("s", {2}, {"x", "y"});
  left.write(left_copy.prefix());
  right.add_f32("w", {2, 2}, {1, 2.5f, 3, 2.5f});
  right.add_strings("s", {2}, {"x", "z"});
  right.write(right_copy.prefix());
  result = diff(left_copy.prefix() + " " + right_copy.prefix());
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("~ s  string [2]: 1 of 2 values differ\n") != std::string::npos);
  CHECK(result.output.find("~ w  float32 [2, 2]: 2 of 4 values differ, max abs difference 1.5\n") !=
        std::string::npos);
}

TEST_CASE("est-ckpt diff: a usage error or an unreadable checkpoint is exit status 2") {
  est::testing::CommandResult result = diff(fixture("half_plus_three"));
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("give two checkpoints, A and B (1 given)") != std::string::npos);
  TempDir dir;
  result = diff(fixture("half_plus_three") + " " + dir.str() + "/nothing");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find(dir.str() + "/nothing") != std::string::npos);
  CHECK(diff("--help").exit_code == 0);
}
