// examples/keras_multi_worker (TensorFlow's multi-worker Keras tutorial) run as programs: one
// process prints Keras's epoch lines off a terminal and its loss falls and accuracy rises over
// the tutorial's 3 epochs of 70 steps; 2 worker processes from TF_CONFIG (127.0.0.1, free ports,
// bounded waits, every child killed by pid whatever happens) end with the weights of one process
// on the same global batches, to float32 rounding, and only the chief prints progress. Both
// end with the tutorial's model.save (the chief's .keras file loads; no workertemp_<id> stays),
// the CheckpointManager's one checkpoint, and BackupAndRestore's backup deleted. A 2-worker job
// killed by pid after a mid-epoch backup, run again, ends bitwise as an uninterrupted job.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/state_file.h"
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

// All the same (to a relative `epsilon`; 0: bitwise).
void check_same_weights(const std::map<std::string, std::vector<float>>& a,
                        const std::map<std::string, std::vector<float>>& b, double epsilon) {
  for (const auto& [name, values] : a) {
    const auto& other = b.at(name);
    REQUIRE(values.size() == other.size());
    int differ = 0;
    for (size_t i = 0; i < values.size(); ++i)
      if (epsilon == 0 ? other[i] != values[i]
                       : other[i] != doctest::Approx(values[i]).epsilon(epsilon))
        ++differ;
    CHECK_MESSAGE(differ == 0, name);
  }
}

// The example's paths under `dir`.
std::vector<std::string> paths_in(const std::filesystem::path& dir) {
  return {"--model_path",     (dir / "keras-model.keras").string(),
          "--backup_dir",     (dir / "backup").string(),
          "--checkpoint_dir", (dir / "ckpt").string()};
}

// The example's argv with model_dir `base` and its saved files in `base`-saved.
std::vector<std::string> example_argv(const std::string& base, const std::string& per_worker,
                                      const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {kExample, "--model_dir", base, "--per_worker_batch_size",
                                   per_worker};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const auto& flag : paths_in(base + "-saved")) argv.push_back(flag);
  return argv;
}

// A job of 2 workers on free 127.0.0.1 ports, running `argv`.
void start_workers(ProcessGroup& group, const std::vector<std::string>& argv) {
  std::string cluster = R"({"worker": ["127.0.0.1:)" + std::to_string(free_port()) +
                        R"(", "127.0.0.1:)" + std::to_string(free_port()) + R"("]})";
  for (int w = 0; w < 2; ++w)
    group.start(argv, {{"TF_CONFIG", R"({"cluster": )" + cluster +
                                         R"(, "task": {"type": "worker", "index": )" +
                                         std::to_string(w) + "}}"},
                       {"EST_JOB_TOKEN", "keras-multi-worker-example-01234"}});
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
  std::string one = (dir.path() / "one").string(), job = (dir.path() / "job").string();
  group.start(example_argv(one, "64", flags), {{"TF_CONFIG", ""}});
  start_workers(group, example_argv(job, "32", flags));
  auto codes = group.wait_all(300s);
  for (auto code : codes) REQUIRE_MESSAGE(code == 0, group.outputs());
  check_same_weights(weights_in(one), weights_in(job), 1e-5);
  // Global batch 64 on both sides; the job's logs are the chief's, and worker 1 prints none.
  CHECK(epoch_lines(group.output(0), 4).size() == 2);
  CHECK(epoch_lines(group.output(1), 4).size() == 2);
  CHECK(epoch_lines(group.output(2), 4).empty());
  CHECK(group.output(1).find("on 2 worker(s), global batch 64") != std::string::npos);
  check_saved(one + "-saved");
  check_saved(job + "-saved");
}

TEST_CASE("keras_multi_worker: a job killed mid-epoch resumes from BackupAndRestore's backup") {
  ScratchDir dir;
  // 2 epochs of 50 steps; backups every 30 batches (the example's save_freq).
  std::vector<std::string> flags = {"--epochs", "2", "--steps_per_epoch", "50"};
  std::string full = (dir.path() / "full").string(), job = (dir.path() / "job").string();
  std::string backup_dir = job + "-saved/backup";
  {
    ProcessGroup killed((dir.path() / "killed").string());
    std::filesystem::create_directories(dir.path() / "killed");
    start_workers(killed, example_argv(job, "32", flags));
    // Once the backup after batch 60 of 100 is written (epoch 2's batch 10: model_dir's latest
    // checkpoint is epoch 1's end, so a job that ignored the backup would not end as the full
    // one), worker 1 dies, then the chief (it cannot go on without it).
    auto backed_up = [&] {
      auto latest = est::checkpoint::latest_checkpoint(backup_dir);
      return latest && (latest->ends_with("-60.h5") || latest->ends_with("-90.h5"));
    };
    auto deadline = std::chrono::steady_clock::now() + 300s;
    while (!backed_up() && std::chrono::steady_clock::now() < deadline && !killed.wait(0, 0ms) &&
           !killed.wait(1, 0ms))
      std::this_thread::sleep_for(10ms);
    REQUIRE_MESSAGE(backed_up(), killed.outputs());
    killed.signal(1, SIGKILL);
    killed.signal(0, SIGKILL);
    auto codes = killed.wait_all(60s);
    REQUIRE_MESSAGE(codes[1] == -SIGKILL, killed.outputs());
    REQUIRE_MESSAGE(codes[0] != 0, killed.outputs());  // killed, or failed without worker 1
  }
  ProcessGroup group(dir.str());
  start_workers(group, example_argv(full, "32", flags));
  start_workers(group, example_argv(job, "32", flags));
  auto codes = group.wait_all(300s);
  for (auto code : codes) REQUIRE_MESSAGE(code == 0, group.outputs());
  check_same_weights(weights_in(full), weights_in(job), 0);  // the same steps on the same data
  check_saved(job + "-saved");
}
#endif
