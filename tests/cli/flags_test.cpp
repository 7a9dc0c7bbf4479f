// The command-line flags of every example, tool and benchmark, run as programs: --help lists
// each flag, `--flag value` and `--flag=value` both reach the program, and an unknown flag, a
// value that does not convert or a missing value is an error whose message names the flag.
// The programs run only for --help and for errors (they stop before any work), except
// linear_regression, whose training takes milliseconds.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tests/command.h"

using namespace est::testing;

namespace {

#ifndef EST_BUILD_ROOT
#error "EST_BUILD_ROOT must name the build directory"
#endif

std::string program(const std::string& relative) {
  return std::string(EST_BUILD_ROOT) + "/" + relative;
}

struct Program {
  std::string path;  // under the build directory
  std::vector<std::string> flags;
};

const std::vector<Program> kPrograms = {
    {"examples/mnist_estimator",
     {"--model_dir", "--max_steps", "--learning_rate", "--strategy", "--devices", "--export"}},
    {"examples/train_cnn", {"--steps", "--batch", "--learning-rate", "--seed"}},
    {"examples/linear_regression", {"--model_dir"}},
    {"examples/custom_training_loop", {"--strategy", "--devices", "--steps", "--global_batch"}},
    {"examples/iris_dnn", {"--model_dir", "--data_dir", "--steps", "--seed"}},
    {"examples/census_wide_deep", {"--model_dir", "--data_dir", "--steps", "--seed"}},
#if EST_HAVE_GRPC
    {"examples/keras_multi_worker",
     {"--model_path", "--model_dir", "--epochs", "--steps_per_epoch", "--per_worker_batch_size"}},
#endif
    {"tools/est-ckpt", {"PATH", "NAME", "--all", "--verify"}},
    {"tools/est-serve", {"--model_base_path", "--model_name", "--port", "--address"}},
    {"bench/cnn_bench", {"--threads", "--repeats", "--examples"}},
    {"bench/data_bench", {}},
    {"bench/checkpoint_bench", {"DIR"}},
    {"bench/estimator_bench", {"--threads", "--steps", "--repeats"}},
    {"bench/keras_bench", {"--epochs", "--steps_per_epoch", "--rounds", "--threads"}},
    {"bench/mirrored_bench", {"--global_batch", "--steps", "--repeats"}},
    {"bench/op_backend_bench", {"--batch", "--rounds", "--threads"}},
    {"bench/threads_bench", {"--seconds", "--rounds", "--block_steps", "--pair_blocks"}},
#if EST_HAVE_GRPC
    {"bench/multi_worker_bench",
     {"--global_batch", "--steps", "--rounds", "--block_steps", "--no_exchange"}},
    {"bench/ps_bench", {"--batch", "--steps", "--rounds", "--block_steps", "--sync_replicas"}},
#endif
    {"bench/memory_bench", {"--steps", "--batch", "--estimator_steps", "--limit"}},
    {"bench/serving_bench", {"--est_serve", "--requests", "--dir", "--ort_http", "--node_path"}},
};

}  // namespace

TEST_CASE("every example, tool and benchmark lists its flags under --help and -h") {
  for (const Program& p : kPrograms) {
    CAPTURE(p.path);
    ProgramResult help = run_program(program(p.path) + " --help");
    CHECK_MESSAGE(help.exit_code == 0, help.output);
    CHECK(contains(help.output, "Usage: " + std::filesystem::path(p.path).filename().string()));
    for (const std::string& flag : p.flags) CHECK_MESSAGE(contains(help.output, flag), flag);
    CHECK(run_program(program(p.path) + " -h").output == help.output);
  }
}

TEST_CASE("an unknown flag, a bad value or a missing value is an error that names the flag") {
  struct Bad {
    std::string command;
    std::string flag;  // what the message must name
  };
  const std::vector<Bad> bad = {
    {"examples/mnist_estimator --bogus 1", "--bogus"},
    {"examples/mnist_estimator --max_steps abc", "--max_steps"},
    {"examples/mnist_estimator --max_steps=abc", "--max_steps"},
    {"examples/mnist_estimator --learning_rate", "--learning_rate"},
    {"examples/mnist_estimator --strategy sideways", "--strategy"},
    {"examples/train_cnn --learning-rate=fast", "--learning-rate"},
    {"examples/train_cnn --learning_rate 0.1", "--learning_rate"},  // not this program's name
    {"examples/custom_training_loop --global_batch x", "--global_batch"},
    {"examples/custom_training_loop --strategy=parameter_server", "--strategy"},
    {"examples/linear_regression --model-dir /tmp/x", "--model-dir"},
    {"tools/est-ckpt --bogus x", "--bogus"},
    {"tools/est-ckpt --verify a b", "--verify"},
    {"bench/cnn_bench --threads two", "--threads"},
    {"bench/data_bench --bogus", "--bogus"},
    {"bench/checkpoint_bench --bogus", "--bogus"},
    {"bench/estimator_bench --steps=x", "--steps"},
    {"bench/mirrored_bench --repeats", "--repeats"},
    {"bench/op_backend_bench --rounds=x", "--rounds"},
    {"bench/threads_bench --seconds", "--seconds"},
    {"bench/threads_bench --block_steps 0", "--block_steps"},
#if EST_HAVE_GRPC
    {"bench/multi_worker_bench --block_steps -1", "--block_steps"},
    {"bench/ps_bench --block_steps=x", "--block_steps"},
#endif
    {"bench/memory_bench --bogus", "--bogus"},
    {"bench/serving_bench --requests=x", "--requests"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.command);
    ProgramResult result = run_program(program(b.command));
    CHECK(result.exit_code > 0);
    CHECK_MESSAGE(contains(result.output, b.flag), result.output);
    CHECK_MESSAGE(contains(result.output, "Run with --help"), result.output);
  }
}

TEST_CASE("est-ckpt's usage errors exit 2 and say what is missing") {
  ProgramResult none = run_program(program("tools/est-ckpt"));
  CHECK(none.exit_code == 2);
  CHECK_MESSAGE(contains(none.output, "PATH is required"), none.output);
  CHECK(run_program(program("tools/est-ckpt --bogus x")).exit_code == 2);
  CHECK(run_program(program("tools/est-ckpt --verify a b")).exit_code == 2);
  CHECK(run_program(program("tools/est-ckpt --help")).exit_code == 0);
}

TEST_CASE("`--flag value` and `--flag=value` both reach the program") {
  ScratchDir dir;
  for (const std::string_view form : {" --model_dir ", " --model_dir="}) {
    const std::string model_dir = dir / (form.back() == '=' ? "equals" : "space");
    CAPTURE(form);
    ProgramResult result = run_program(program("examples/linear_regression") + std::string(form) +
                                       shell_quote(model_dir));
    CHECK_MESSAGE(result.exit_code == 0, result.output);
    CHECK(contains(result.output, "Evaluation: loss = "));
    CHECK(std::filesystem::exists(std::filesystem::path(model_dir) / "checkpoint"));
  }
}

TEST_CASE("a comma-separated --devices replaces the default list") {
  // custom_training_loop prints its strategy and batch split before it reads any data; with
  // --steps 0 it stops there (the output is checked, not the exit status, which needs the data).
  ProgramResult three = run_program(program("examples/custom_training_loop") +
                                    " --devices=/cpu:0,/cpu:1,/cpu:2 --global_batch 129 --steps 0");
  CHECK_MESSAGE(contains(three.output, "MirroredStrategy with devices (/cpu:0, /cpu:1, /cpu:2)"),
                three.output);
  CHECK(contains(three.output, "global batch 129 = 3 replicas x 43"));
  ProgramResult one = run_program(program("examples/custom_training_loop") +
                                  " --strategy one_device --devices /cpu:1 --steps=0");
  CHECK_MESSAGE(contains(one.output, "OneDeviceStrategy with devices (/cpu:1)"), one.output);
}

TEST_CASE("the canned-estimator examples run end to end on a few steps") {
  ScratchDir dir;
  ProgramResult iris =
      run_program(program("examples/iris_dnn") + " --steps 300 --data_dir " +
                  shell_quote(dir / "iris") + " --model_dir " + shell_quote(dir / "iris_model"));
  CHECK_MESSAGE(iris.exit_code == 0, iris.output);
  CHECK(contains(iris.output, "Test set accuracy: "));
  CHECK(contains(iris.output, "Prediction is \"Setosa\""));
  ProgramResult census = run_program(program("examples/census_wide_deep") +
                                     " --steps 50 --data_dir " + shell_quote(dir / "census") +
                                     " --model_dir " + shell_quote(dir / "census_model"));
  CHECK_MESSAGE(census.exit_code == 0, census.output);
  CHECK(contains(census.output, "Test set: accuracy "));
  CHECK(std::filesystem::exists(std::filesystem::path(dir / "census_model") / "checkpoint"));
}
