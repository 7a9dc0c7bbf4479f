// examples/keras_multi_worker (TensorFlow's multi-worker Keras tutorial) run as programs: one
// process prints Keras's epoch lines off a terminal and its loss falls and accuracy rises over
// the tutorial's 3 epochs of 70 steps; 2 worker processes from TF_CONFIG (127.0.0.1, free ports,
// bounded waits, every child killed by pid whatever happens) end with the weights of one process
// on the same global batches, to float32 rounding, and only the chief prints progress. Both
// end with the tutorial's model.save (the chief's .keras file loads; no workertemp_<id> stays),
// the CheckpointManager's one checkpoint, and BackupAndRestore's backup deleted. A 2-worker job
// killed by pid after a mid-epoch backup, run again, ends bitwise as an uninterrupted job. Under
// est-launch (-n 2, --max-restarts 1), a worker killed by pid mid-epoch restarts the job, which
// resumes from the backup's epoch and ends on the uninterrupted est-launch job's last epoch line.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
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
#ifndef EST_LAUNCH_PROGRAM
#error "EST_LAUNCH_PROGRAM must name the est-launch program"
#endif

const std::string kExample = std::string(EST_BUILD_ROOT) + "/examples/keras_multi_worker";
const std::string kConvnet = std::string(EST_BUILD_ROOT) + "/examples/keras_mnist_convnet";
const std::string kLaunch = EST_LAUNCH_PROGRAM;

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

// The tasks est-launch starts run in their own process groups: this remembers every one seen (by
// /proc, parent `launcher`) and kills by pid, at the end, those still running the example.
class LaunchedTasks {
 public:
  explicit LaunchedTasks(pid_t launcher) : launcher_(launcher) {}
  ~LaunchedTasks() {
    scan();
    for (pid_t pid : seen_)
      if (command_of(pid).find("keras_multi_worker") != std::string::npos) ::kill(pid, SIGKILL);
  }
  LaunchedTasks(const LaunchedTasks&) = delete;
  LaunchedTasks& operator=(const LaunchedTasks&) = delete;

  // est-launch's running "worker" task (TF_CONFIG's task type), if it has started.
  std::optional<pid_t> worker() {
    static const std::regex type(R"("type" *: *"worker")");
    for (pid_t pid : scan()) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
      std::string entry;
      while (std::getline(in, entry, '\0'))
        if (entry.starts_with("TF_CONFIG=") && std::regex_search(entry, type)) return pid;
    }
    return std::nullopt;
  }

 private:
  static std::string command_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string command;
    std::getline(in, command, '\0');
    return command;
  }
  // The launcher's children now (and remembers them).
  std::vector<pid_t> scan() {
    std::vector<pid_t> children;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      size_t close = line.rfind(')');  // "pid (comm) state ppid ..."
      if (close == std::string::npos) continue;
      std::istringstream fields(line.substr(close + 1));
      std::string state;
      pid_t parent = 0;
      fields >> state >> parent;
      if (parent != launcher_) continue;
      pid_t pid = std::stoi(name);
      children.push_back(pid);
      seen_.insert(pid);
    }
    return children;
  }

  pid_t launcher_;
  std::set<pid_t> seen_;
};

// The job of `argv` (its flags) under est-launch -n 2 on free 127.0.0.1 ports.
size_t start_launch(ProcessGroup& group, const std::vector<std::string>& argv, int max_restarts) {
  std::vector<std::string> command = {
      kLaunch,          "-n", "2", "--max-restarts", std::to_string(max_restarts),
      "--grace-period", "5",  "--"};
  command.insert(command.end(), argv.begin(), argv.end());
  return group.start(command, {{"TF_CONFIG", ""}});
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

TEST_CASE("keras_multi_worker under est-launch: a worker killed mid-epoch, the job resumed") {
  ScratchDir dir;
  // 3 epochs of 20 steps; the backup after batch 30 (the example's save_freq) is epoch 2's
  // batch 10.
  std::vector<std::string> flags = {"--epochs", "3", "--steps_per_epoch", "20"};
  std::string full = (dir.path() / "full").string(), job = (dir.path() / "job").string();
  std::string backup_dir = job + "-saved/backup";
  ProcessGroup group(dir.str());
  size_t clean = start_launch(group, example_argv(full, "32", flags), 0);
  size_t killed = start_launch(group, example_argv(job, "32", flags), 1);
  LaunchedTasks clean_tasks(group.pid(clean)), tasks(group.pid(killed));
  auto backed_up = [&] {
    auto latest = est::checkpoint::latest_checkpoint(backup_dir);
    return latest && latest->ends_with("-30.h5");
  };
  auto deadline = std::chrono::steady_clock::now() + 300s;
  while (!backed_up() && std::chrono::steady_clock::now() < deadline && !group.wait(killed, 0ms))
    std::this_thread::sleep_for(10ms);
  REQUIRE_MESSAGE(backed_up(), group.output(killed));
  std::optional<pid_t> worker = tasks.worker();
  REQUIRE_MESSAGE(worker, group.output(killed));
  REQUIRE(::kill(*worker, SIGKILL) == 0);
  auto codes = group.wait_all(300s);
  std::string output = group.output(killed), clean_output = group.output(clean);
  REQUIRE_MESSAGE(codes[clean] == 0, clean_output);
  REQUIRE_MESSAGE(codes[killed] == 0, output);
  INFO(output);
  // Restarted once, after the first attempt's epoch 2 had begun; the second attempt resumes at
  // epoch 2 (from the backup) and never begins epoch 1 again.
  size_t restart = output.find("restarting the job (attempt 2 of 2)");
  REQUIRE_MESSAGE(restart != std::string::npos, output);
  CHECK(output.rfind("Epoch 2/3\n", restart) != std::string::npos);
  std::string resumed = output.substr(restart);
  CHECK_MESSAGE(resumed.find("Epoch 1/3\n") == std::string::npos, output);
  CHECK_MESSAGE(resumed.find("Epoch 2/3\n") != std::string::npos, output);
  CHECK_MESSAGE(resumed.find("Epoch 3/3\n") != std::string::npos, output);
  // Epoch 3's line (the first after "Epoch 3/3"; load_model's fit follows), as the uninterrupted
  // job's: the resume is bitwise.
  auto epoch_3 = [](const std::string& text) {
    size_t at = text.rfind("Epoch 3/3\n");
    return at == std::string::npos ? std::vector<EpochLine>{} : epoch_lines(text.substr(at), 20);
  };
  auto line = epoch_3(resumed), clean_line = epoch_3(clean_output);
  REQUIRE_MESSAGE(!clean_line.empty(), clean_output);
  REQUIRE_MESSAGE(!line.empty(), output);
  CHECK(line[0].loss == clean_line[0].loss);
  CHECK(line[0].accuracy == clean_line[0].accuracy);
  check_same_weights(weights_in(full), weights_in(job), 0);
  check_saved(full + "-saved");
  check_saved(job + "-saved");
}
#endif
