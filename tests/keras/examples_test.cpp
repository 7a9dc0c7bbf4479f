// examples/keras_multi_worker (TensorFlow's multi-worker Keras tutorial) run as programs: one
// process prints Keras's epoch lines off a terminal and its loss falls and accuracy rises over
// the tutorial's 3 epochs of 70 steps; 2 worker processes from TF_CONFIG (127.0.0.1, free ports,
// bounded waits, every child killed by pid whatever happens) end with the weights of one process
// on the same global batches, to float32 rounding, and only the chief prints progress. Both
// end with the tutorial's model.save (the chief's .keras file loads; no workertemp_<id> stays),
// the CheckpointManager's one checkpoint, and BackupAndRestore's backup deleted.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "estimator/estimator.h"
#include "keras/checkpoint.h"
#include "keras/model.h"
#include "tests/command.h"
#include "tests/process_group.h"

using namespace est;
using namespace est::testing;
using namespace std::chrono_literals;

namespace {

#ifndef EST_BUILD_ROOT
#error "EST_BUILD_ROOT must name the build directory"
#endif

const std::string kExample = std::string(EST_BUILD_ROOT) + "/examples/keras_multi_worker";
const std::string kConvnet = std::string(EST_BUILD_ROOT) + "/examples/keras_mnist_convnet";

struct EpochLine {
  double loss, accuracy;
};

// The final bar line of each epoch: "70/70 [==============================] - 3s 40ms/step -
// loss: 2.2720 - accuracy: 0.2181".
std::vector<EpochLine> epoch_lines(const std::string& output, int steps) {
  std::regex line(std::to_string(steps) + "/" + std::to_string(steps) +
                  R"( \[=+\] - \d+s \d+m?s/step - loss: (\d+\.\d{4}) - accuracy: (\d\.\d{4}))");
  std::vector<EpochLine> lines;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    lines.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  return lines;
}

std::map<std::string, std::vector<float>> weights_in(const std::string& model_dir) {
  Estimator reader([](const Features&, const Tensor&, ModeKeys,
                      ModelContext&) -> EstimatorSpec { throw std::logic_error("unused"); },
                   RunConfig{.model_dir = model_dir});
  std::map<std::string, std::vector<float>> weights;
  for (const char* name : {"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias",
                           "dense_1/kernel", "dense_1/bias"})
    weights[name] = reader.get_variable_value(name).to_vector<float>();
  return weights;
}

// What the example leaves in `dir` after model.save, the Checkpoint and BackupAndRestore.
void check_saved(const std::filesystem::path& dir) {
  auto loaded = keras::load_model((dir / "keras-model.keras").string());
  CHECK(loaded->is_sequential());
  CHECK(loaded->weights().size() == 6);  // conv2d, dense, dense_1: kernel and bias
  CHECK_FALSE(std::filesystem::exists(dir / "workertemp_1"));  // worker 1's save and checkpoint
  auto latest = keras::latest_checkpoint((dir / "ckpt").string());
  REQUIRE(latest);
  CHECK(std::filesystem::exists(*latest + ".h5"));
  CHECK_FALSE(std::filesystem::exists(dir / "backup"));  // deleted: fit ended normally
}

// The example's paths under `dir`.
std::vector<std::string> paths_in(const std::filesystem::path& dir) {
  return {"--model_path",     (dir / "keras-model.keras").string(),
          "--backup_dir",     (dir / "backup").string(),
          "--checkpoint_dir", (dir / "ckpt").string()};
}

}  // namespace

TEST_CASE("keras_mnist_convnet: a few epochs on 1280 rows with validation_split 0.1") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  group.start({kConvnet, "--epochs", "3", "--train_samples", "1280", "--test_samples", "500"});
  auto code = group.wait(0, 300s);
  std::string output = group.output(0);
  REQUIRE_MESSAGE(code == 0, output);
  CHECK(output.find("x_train shape: (1280, 28, 28, 1)\n1280 train samples\n500 test samples\n") !=
        std::string::npos);
  CHECK(output.find("Total params: 34,826") != std::string::npos);
  // 1152 training rows (the last 128 validate): 9 batches of 128 per epoch.
  std::regex line(
      R"(9/9 \[=+\] - \d+s \d+[mu]?s/step - loss: (\d+\.\d{4}) - accuracy: (\d\.\d{4}) - )"
      R"(val_loss: (\d+\.\d{4}) - val_accuracy: (\d\.\d{4}))");
  std::vector<double> losses;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  REQUIRE_MESSAGE(losses.size() == 3, output);
  CHECK(losses[2] < losses[0]);
  CHECK(std::regex_search(output, std::regex(R"(Test loss: \d+\.\d+\nTest accuracy: 0\.\d+)")));
}

#if EST_HAVE_GRPC
TEST_CASE("keras_multi_worker alone: Keras's epoch lines, loss falling and accuracy rising") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  std::vector<std::string> argv{kExample};
  for (const auto& flag : paths_in(dir.path())) argv.push_back(flag);
  group.start(argv, {{"TF_CONFIG", ""}});
  auto code = group.wait(0, 300s);
  std::string output = group.output(0);
  REQUIRE_MESSAGE(code == 0, output);
  for (int epoch = 1; epoch <= 3; ++epoch)
    CHECK(output.find("Epoch " + std::to_string(epoch) + "/3\n") != std::string::npos);
  auto lines = epoch_lines(output, 70);
  REQUIRE_MESSAGE(lines.size() == 3, output);
  CHECK(lines[2].loss < lines[0].loss);
  CHECK(lines[1].loss < lines[0].loss);
  CHECK(lines[2].accuracy > lines[0].accuracy);
  check_saved(dir.path());
}

TEST_CASE("keras_multi_worker on 2 worker processes equals one process on the global batch") {
  ScratchDir dir;
  ProcessGroup group(dir.str());
  std::vector<std::string> flags = {"--epochs", "2", "--steps_per_epoch", "4"};
  auto run = [&](const std::string& model_dir, const std::string& per_worker) {
    std::vector<std::string> argv = {kExample, "--model_dir", model_dir, "--per_worker_batch_size",
                                     per_worker};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const auto& flag : paths_in(model_dir + "-saved")) argv.push_back(flag);
    return argv;
  };
  std::string one = (dir.path() / "one").string(), job = (dir.path() / "job").string();
  group.start(run(one, "64"), {{"TF_CONFIG", ""}});
  std::string cluster = R"({"worker": ["127.0.0.1:)" + std::to_string(free_port()) +
                        R"(", "127.0.0.1:)" + std::to_string(free_port()) + R"("]})";
  for (int w = 0; w < 2; ++w)
    group.start(run(job, "32"), {{"TF_CONFIG", R"({"cluster": )" + cluster +
                                                   R"(, "task": {"type": "worker", "index": )" +
                                                   std::to_string(w) + "}}"},
                                 {"EST_JOB_TOKEN", "keras-multi-worker-example-01234"}});
  auto codes = group.wait_all(300s);
  for (auto code : codes) REQUIRE_MESSAGE(code == 0, group.outputs());
  auto single = weights_in(one), workers = weights_in(job);
  for (const auto& [name, values] : single) {
    const auto& other = workers.at(name);
    REQUIRE(values.size() == other.size());
    int differ = 0;
    for (size_t i = 0; i < values.size(); ++i)
      if (other[i] != doctest::Approx(values[i]).epsilon(1e-5)) ++differ;
    CHECK_MESSAGE(differ == 0, name);
  }
  // Global batch 64 on both sides; the job's logs are the chief's, and worker 1 prints none.
  CHECK(epoch_lines(group.output(0), 4).size() == 2);
  CHECK(epoch_lines(group.output(1), 4).size() == 2);
  CHECK(epoch_lines(group.output(2), 4).empty());
  CHECK(group.output(1).find("on 2 worker(s), global batch 64") != std::string::npos);
  check_saved(one + "-saved");
  check_saved(job + "-saved");
}
#endif
