// `est-ckpt convert SRC DST --to tf|est`: est's checkpoint into a TensorFlow bundle that holds
// every tensor under its name with its bytes (global_step int64), and back into an est
// checkpoint (a file, or a model directory with its state file) that restores the same
// tensors, slots as slots; bad input is an error naming what and what to do, exit status 1.
#include "helpers.h"
#include "tf_bundle_helpers.h"

#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_convert.h"

using namespace est;
using namespace est::checkpoint;
using est::testing::CommandResult;
using est::testing::sample_bundle;
namespace fs = std::filesystem;

namespace {

CommandResult convert(const std::string& arguments) {
  REQUIRE_MESSAGE(fs::exists(EST_TEST_CKPT_TOOL), "build the est-ckpt target first");
  return est::testing::run_command(std::string(EST_TEST_CKPT_TOOL) + " convert " + arguments);
}

}  // namespace

TEST_CASE("est-ckpt convert: est -> TensorFlow -> est keeps every tensor, slots and the step") {
  est::testing::TempDir dir;
  const TensorBundle original = sample_bundle(42, 0.5);
  save(dir / "model.ckpt-42.h5", original);

  CommandResult to_tf = convert(dir / "model.ckpt-42.h5 " + dir / "tf/model.ckpt-42 --to tf");
  REQUIRE_MESSAGE(to_tf.exit_code == 0, to_tf.output);
  CHECK(to_tf.output.find("10 tensors, global_step 42") != std::string::npos);
  CHECK(to_tf.output.find("left out 2 est blob(s)") != std::string::npos);
  TfBundleReader reader(dir / "tf/model.ckpt-42");
  CHECK(reader.list_variables().size() == original.tensors.size());
  for (const TensorEntry& entry : original.tensors)
    CHECK_MESSAGE(est::testing::same_bytes(reader.load_variable(entry.name), entry.value),
                  entry.name);
  CHECK(reader.load_variable("global_step").dtype() == DType::kI64);

  // Back into a fresh model directory: model.ckpt-42.h5 and a state file naming it.
  CommandResult to_est = convert(dir / "tf/model.ckpt-42 " + dir / "back --to est");
  REQUIRE_MESSAGE(to_est.exit_code == 0, to_est.output);
  CHECK(latest_checkpoint(dir / "back") == dir / "back/model.ckpt-42.h5");
  TensorBundle back = load(dir / "back");
  CHECK(back.global_step == 42);
  CHECK(back.tensors.size() == original.tensors.size());
  for (const TensorEntry& entry : original.tensors) {
    const TensorEntry* found = back.find(entry.name);
    REQUIRE_MESSAGE(found != nullptr, entry.name);
    CHECK_MESSAGE(est::testing::same_bytes(found->value, entry.value), entry.name);
    CHECK_MESSAGE(found->kind == entry.kind, entry.name);  // Adam, Adam_1 are slots again
  }
  CHECK_FALSE(back.find("global_step")->trainable);
  // A .h5 destination is the file itself.
  REQUIRE(convert(dir / "tf/model.ckpt-42 " + dir / "one.h5 --to est").exit_code == 0);
  CHECK(load(dir / "one.h5").tensors.size() == original.tensors.size());
}

TEST_CASE("est-ckpt convert refuses bad input with a message naming what and what to do") {
  est::testing::TempDir dir;
  save(dir / "model.ckpt-1.h5", sample_bundle(1));
  REQUIRE(convert(dir / "model.ckpt-1.h5 " + dir / "tf/ckpt --to tf").exit_code == 0);

  CommandResult missing = convert(dir / "nothing.h5 " + dir / "out --to tf");
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("NOT_FOUND") != std::string::npos);
  CHECK(missing.output.find("nothing.h5") != std::string::npos);

  est::testing::TempDir corrupt;
  std::ofstream(corrupt / "model.ckpt-3.h5") << "not a checkpoint";
  CommandResult damaged = convert(corrupt / "model.ckpt-3.h5 " + corrupt / "out --to tf");
  CHECK(damaged.exit_code == 1);
  CHECK(damaged.output.find("DATA_LOSS") != std::string::npos);

  CommandResult exists = convert(dir / "model.ckpt-1.h5 " + dir / "tf/ckpt --to tf");
  CHECK(exists.exit_code == 1);
  CHECK(exists.output.find("tf/ckpt.index already exists") != std::string::npos);
  CHECK(exists.output.find("pick another destination") != std::string::npos);
  CHECK(
      convert(dir / "tf/ckpt " + dir / "model.ckpt-1.h5 --to est").output.find("already exists") !=
      std::string::npos);

  CommandResult wrong_way = convert(dir / "tf/ckpt " + dir / "again --to tf");
  CHECK(wrong_way.exit_code == 1);
  CHECK(wrong_way.output.find("is a TensorFlow checkpoint already; `--to est`") !=
        std::string::npos);
  CHECK(convert(dir / "model.ckpt-1.h5 " + dir / "x --to est")
            .output.find("is est's checkpoint already; `--to tf`") != std::string::npos);

  // A dtype est lacks (int8, written here as TensorFlow would) is named.
  tf_test::BundleBuilder builder;
  builder.add_bytes("quantized/weights", tfproto::DT_INT8, {2}, std::string("\x01\x02", 2),
                    data::crc32c("\x01\x02", 2));
  builder.write(dir / "int8");
  CommandResult int8 = convert(dir / "int8 " + dir / "int8_est --to est");
  CHECK(int8.exit_code == 1);
  CHECK(int8.output.find("\"quantized/weights\" has dtype int8") != std::string::npos);
  // A string tensor has no place in est's HDF5 checkpoint: named too.
  tf_test::BundleBuilder strings;
  strings.add_strings("vocab", {1}, {"a"});
  strings.write(dir / "strings");
  CHECK(convert(dir / "strings " + dir / "s.h5 --to est").output.find("\"vocab\" is a string") !=
        std::string::npos);

  CommandResult usage = convert(dir / "model.ckpt-1.h5 " + dir / "y --to onnx");
  CHECK(usage.exit_code == 2);
  CHECK(usage.output.find("--to") != std::string::npos);
}
