// keras ModelCheckpoint with an integer save_freq in a 2-worker job
// (MultiWorkerMirroredStrategy from TF_CONFIG; Keras 2.x keras/callbacks.py ModelCheckpoint and
// keras/distribute/distributed_file_utils.py): two processes of this test program (127.0.0.1,
// free ports, bounded waits, killed by pid whatever happens) fit 3 epochs of 4 steps saving
// every 3 batches. Every worker saves at the same batches; the chief's files are the formatted
// paths at batches 3, 6, 9 and 12 of the fit (epoch 1 batch 3, epoch 2 batch 2, epoch 3 batches 1
// and 4), worker 1 writes into checkpoints/workertemp_1/ and removes it each time, so only the
// chief's four files stay, and the last one holds the weights the job ended with.
#include <doctest/doctest.h>

#if EST_HAVE_GRPC

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "tests/keras/callbacks_test_util.h"
#include "tests/process_group.h"

using namespace keras_callbacks_test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Set for the worker processes the test starts: the job's directory.
constexpr const char* kWorkerDir = "EST_KERAS_CHECKPOINT_WORKER_DIR";
constexpr const char* kFilepath = "model-{epoch:02d}-{batch:02d}.keras";

std::vector<std::vector<float>> weights_of(K::Model& model) {
  std::vector<std::vector<float>> out;
  for (const auto& tensor : model.get_weights()) out.push_back(tensor.to_vector<float>());
  return out;
}

}  // namespace

// One worker of the next test's job (its role from TF_CONFIG). Runs only when that test starts
// it.
TEST_CASE("keras ModelCheckpoint worker process (run by the 2-worker test)" *
          doctest::skip(std::getenv(kWorkerDir) == nullptr)) {
  fs::path dir = std::getenv(kWorkerDir);
  auto strategy =
      est::distribute::MultiWorkerMirroredStrategy::from_env({}, {.session_creation_timeout = 60s,
                                                                  .heartbeat_interval = 200ms,
                                                                  .heartbeat_timeout = 5000ms,
                                                                  .devices = {"/cpu:0"}});
  K::Sequential model({K::layers::InputLayer({.shape = {6}}),
                       K::layers::Dense({.units = 8, .activation = "relu"}),
                       K::layers::Dense({.units = 2})});
  model.config().model_dir = (dir / "model").string();  // the job's: every worker sees it
  model.config().tf_random_seed = 7;
  model.config().train_distribute = strategy;  // as `with strategy.scope():`
  model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.1}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  auto checkpoint = std::make_shared<K::ModelCheckpoint>(
      K::ModelCheckpointOptions{.filepath = (dir / "checkpoints" / kFilepath).string(),
                                .verbose = 1,
                                .save_freq = int64_t{3}});
  model.fit(binary_problem(),
            {.epochs = 3, .steps_per_epoch = 4, .callbacks = {checkpoint}, .verbose = 0});
  // The loaded models train alone: their Estimators must not read the job's TF_CONFIG (the
  // strategy has read it), as in examples/keras_multi_worker.
  ::unsetenv("TF_CONFIG");
  if (strategy->is_chief()) {  // the last file: the job's last step (model_dir's latest)
    auto last = K::load_model((dir / "checkpoints" / "model-03-04.keras").string());
    auto first = K::load_model((dir / "checkpoints" / "model-01-03.keras").string());
    CHECK(weights_of(*last) == weights_of(model));
    CHECK(weights_of(*first) != weights_of(model));
  }
}

TEST_CASE("keras ModelCheckpoint every 3 batches on 2 workers: the chief's files alone stay") {
  ScratchDir scratch;
  fs::path dir;
  std::unique_ptr<est::testing::ProcessGroup> group;
  // Started again on new ports (up to 3 times, each in its own directory) when a port chosen
  // free was taken by another process before a worker listened on it.
  for (int attempt = 1;; ++attempt) {
    dir = scratch.path / ("attempt" + std::to_string(attempt));
    fs::create_directories(dir);
    group = std::make_unique<est::testing::ProcessGroup>(dir.string());
    std::string cluster = R"({"worker": ["127.0.0.1:)" + std::to_string(est::testing::free_port()) +
                          R"(", "127.0.0.1:)" + std::to_string(est::testing::free_port()) +
                          R"("]})";
    for (int w = 0; w < 2; ++w)
      group->start(
          {"/proc/self/exe", "-tc=keras ModelCheckpoint worker process*"},
          {{"TF_CONFIG", R"({"cluster": )" + cluster + R"(, "task": {"type": "worker", "index": )" +
                             std::to_string(w) + "}}"},
           {"EST_JOB_TOKEN", "keras-model-checkpoint-test-0123"},
           {kWorkerDir, dir.string()}});
    auto codes = group->wait_all(300s);
    bool done = codes[0] == 0 && codes[1] == 0;
    if (done || attempt == 3 || group->outputs().find("cannot listen on") == std::string::npos) {
      for (const auto& code : codes) REQUIRE_MESSAGE(code == 0, group->outputs());
      break;
    }
  }
  INFO(group->outputs());
  // Batches 3, 6, 9 and 12 of the fit: (epoch, batch) 1-based as Keras formats them.
  std::set<std::string> expected{"model-01-03.keras", "model-02-02.keras", "model-03-01.keras",
                                 "model-03-04.keras"};
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir / "checkpoints"))
    files.insert(entry.path().filename().string());
  CHECK(files == expected);  // no workertemp_1 left
  // Both saved at each of them: the chief to the file, worker 1 to its temporary directory.
  for (const auto& name : expected) {
    std::string epoch = std::to_string(std::stoi(name.substr(6, 2)));
    CHECK(group->output(0).find("Epoch " + epoch + ": saving model to " +
                                (dir / "checkpoints" / name).string() + "\n") != std::string::npos);
    CHECK(group->output(1).find("Epoch " + epoch + ": saving model to " +
                                (dir / "checkpoints" / "workertemp_1" / name).string() + "\n") !=
          std::string::npos);
  }
}

#endif
