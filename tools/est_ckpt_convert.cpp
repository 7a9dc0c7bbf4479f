// est-ckpt convert: parses `SRC DST --to tf|est`, converts, prints what it wrote.
#include "tools/est_ckpt_convert.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "checkpoint/tf_convert.h"
#include "ops/error.h"

namespace est::tools {

int convert_main(int argc, char** argv) {
  std::string source, destination, to;
  CLI::App app(
      "est-ckpt convert: est's checkpoint into TensorFlow's V2 format (--to tf) or a TensorFlow "
      "checkpoint into est's (--to est).",
      "est-ckpt convert");
  app.footer(
      "--to tf:  SRC is est's checkpoint file or model directory; DST a prefix (writes\n"
      "          DST.index and DST.data-00000-of-00001, read by tf.train.load_checkpoint)\n"
      "--to est: SRC is a TF checkpoint prefix, model directory or SavedModel; DST a .h5 file,\n"
      "          or a new model directory (model.ckpt-<step>.h5 and its state file)\n"
      "DST must not exist.");
  app.add_option("SRC", source, "the checkpoint to convert")->required();
  app.add_option("DST", destination, "where to write it")->required();
  app.add_option("--to", to, "the format to write: tf or est")
      ->required()
      ->check(CLI::IsMember({"tf", "est"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int status = app.exit(error);
    return status == 0 ? 0 : 2;
  }
  try {
    if (to == "tf") {
      const checkpoint::ConvertResult result = checkpoint::convert_to_tf(source, destination);
      fmt::print("wrote TensorFlow checkpoint {} ({} tensors, global_step {})\n", result.written,
                 result.tensors, result.global_step);
      if (result.blobs_left > 0)
        fmt::print(
            "left out {} est blob(s) (input position, RNG state): TensorFlow's format "
            "has no place for them\n",
            result.blobs_left);
    } else {
      const checkpoint::ConvertResult result = checkpoint::convert_to_est(source, destination);
      fmt::print("wrote est checkpoint {} ({} tensors, global_step {})\n", result.written,
                 result.tensors, result.global_step);
    }
    return 0;
  } catch (const Error& error) {
    fmt::print(stderr, "est-ckpt convert: {}: {}\n", status_code_name(error.code()), error.what());
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "est-ckpt convert: {}\n", error.what());
    return 1;
  }
}

}  // namespace est::tools
