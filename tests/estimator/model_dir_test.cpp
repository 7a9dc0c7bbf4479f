// The Estimator and its model_dir: train() holds the model_dir lock on the chief while it runs
// (a second trainer fails at once naming the first; released on return and on throw; non-chief
// tasks take none), a regular file as model_dir and an empty `checkpoint` state file are their
// own clear errors and leave the directory as it was.
#include <unistd.h>

#include <fstream>

#include "checkpoint/model_dir.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// The message of the FailedPreconditionError a second lock on `model_dir` raises, or "" when
// the lock was free.
std::string second_lock_message(const std::string& model_dir) {
  try {
    checkpoint::ModelDirLock lock(model_dir);
  } catch (const FailedPreconditionError& error) {
    return error.what();
  }
  return "";
}

// Records, once the session exists, what a second lock on model_dir says.
class TryLockHook : public SessionRunHook {
 public:
  explicit TryLockHook(std::string model_dir) : model_dir_(std::move(model_dir)) {}
  void after_create_session(Session&) override {
    lock_file_existed = fs::exists(fs::path(model_dir_) / checkpoint::kModelDirLockName);
    message = second_lock_message(model_dir_);
  }
  bool lock_file_existed = false;
  std::string message;

 private:
  std::string model_dir_;
};

}  // namespace

TEST_CASE("train holds the model_dir lock while it runs and releases it on return and on throw") {
  TempDir dir;
  const std::string lock_file = dir / checkpoint::kModelDirLockName;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto hook = std::make_shared<TryLockHook>(dir.str());
  estimator.train(linear_input_fn(), {.hooks = {hook}, .steps = 3});
  CHECK(hook->lock_file_existed);
  CHECK(hook->message.find(fmt::format("model_dir {} is in use: process {} on host", dir.str(),
                                       ::getpid())) != std::string::npos);
  CHECK_FALSE(fs::exists(lock_file));  // released when train() returned
  CHECK(second_lock_message(dir.str()).empty());

  // A train() that throws (a NaN loss at step 5) releases it too.
  Params params;
  params.set("nan_at_step", int64_t{5});
  Estimator failing(linear_model_fn, dir.str(), quiet_config(""), params);
  CHECK_THROWS(failing.train(linear_input_fn(64, 8, false, -1), {.steps = 10}));
  CHECK_FALSE(fs::exists(lock_file));
  CHECK(second_lock_message(dir.str()).empty());
}

TEST_CASE("a second trainer on a locked model_dir fails at once naming the first") {
  TempDir dir;
  std::optional<checkpoint::ModelDirLock> first(std::in_place, dir.str());
  Estimator second(linear_model_fn, quiet_config(dir.str()));
  try {
    second.train(linear_input_fn(), {.steps = 3});
    FAIL("expected FailedPreconditionError");
  } catch (const FailedPreconditionError& error) {
    std::string message = error.what();
    CHECK(message.find(fmt::format("is in use: process {} on host", ::getpid())) !=
          std::string::npos);
    CHECK(message.find("only the chief trains into model_dir") != std::string::npos);
  }
  // It failed before writing anything.
  CHECK(files_with_prefix(dir.str(), "model.ckpt").empty());
  CHECK(files_with_prefix(dir.str(), "events.out").empty());
  CHECK_FALSE(fs::exists(dir / "checkpoint"));

  // A non-chief task takes no lock (it writes no checkpoints into model_dir).
  RunConfig worker = quiet_config(dir.str());
  worker.is_chief = false;
  worker.task_id = 1;
  Estimator(linear_model_fn, worker).train(linear_input_fn(), {.steps = 2});
  CHECK(files_with_prefix(dir.str(), "model.ckpt").empty());

  first.reset();
  second.train(linear_input_fn(), {.steps = 3});
  CHECK_FALSE(files_with_prefix(dir.str(), "model.ckpt").empty());
}

TEST_CASE("a model_dir that is a regular file is its own error at construction") {
  TempDir dir;
  const std::string file = dir / "model";
  std::ofstream(file) << "notes";
  try {
    Estimator estimator(linear_model_fn, quiet_config(file));
    FAIL("expected FailedPreconditionError");
  } catch (const FailedPreconditionError& error) {
    std::string message = error.what();
    CHECK(message.find("model_dir " + file + " is a regular file, not a directory") !=
          std::string::npos);
    CHECK(message.find("damaged") == std::string::npos);
  }
  CHECK(read_bytes(file) == "notes");
}

TEST_CASE("an empty checkpoint state file stops train and evaluate; the checkpoints stay") {
  TempDir dir;
  Estimator(linear_model_fn, quiet_config(dir.str())).train(linear_input_fn(), {.steps = 3});
  const std::vector<std::string> checkpoints = files_with_prefix(dir.str(), "model.ckpt");
  REQUIRE(checkpoints.size() == 2);  // steps 0 and 3
  const std::string step_0 = read_bytes(dir / "model.ckpt-0.h5");
  std::ofstream(dir / "checkpoint", std::ios::trunc).close();

  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  for (const auto& call :
       std::vector<std::function<void()>>{[&] { estimator.train(linear_input_fn(), {.steps = 3}); },
                                          [&] { estimator.evaluate(linear_input_fn()); }}) {
    try {
      call();
      FAIL("expected DataLossError");
    } catch (const DataLossError& error) {
      std::string message = error.what();
      CHECK(message.find("Invalid checkpoint state loaded from " + dir / "checkpoint") !=
            std::string::npos);
      CHECK(message.find("the file is empty") != std::string::npos);
    }
  }
  // Nothing restarted at step 0 over the existing checkpoints.
  CHECK(files_with_prefix(dir.str(), "model.ckpt") == checkpoints);
  CHECK(read_bytes(dir / "model.ckpt-0.h5") == step_0);
  CHECK(fs::file_size(dir / "checkpoint") == 0);
}
