// BackupAndRestore: periodic backups, automatic resume after an interruption, deletion when
// training finishes, per-epoch mode, and only the chief writing.
#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

// A toy training state: one weight that equals the step, and an input position.
struct Trainer {
  Tensor weight = Tensor::zeros({16});
  TensorBundle state() {
    TensorBundle bundle;
    bundle.global_step = step;
    bundle.add_variable("w", weight);
    bundle.add_blob("iterator", fmt::format("position {}", step * 32));
    return bundle;
  }
  void train_step() {
    ++step;
    weight.fill(static_cast<double>(step));
  }
  int64_t step = 0;
};

}  // namespace

TEST_CASE("BackupAndRestore resumes an interrupted run and deletes the backup at the end") {
  TempDir dir;
  const std::string backup_dir = dir / "backup";
  {
    BackupAndRestore backup({.backup_dir = backup_dir, .save_freq_steps = 3});
    Trainer trainer;
    TensorBundle state = trainer.state();
    CHECK_FALSE(backup.restore(state).has_value());  // fresh start
    for (int i = 0; i < 7; ++i) {
      trainer.train_step();
      backup.on_step_end(trainer.state());
    }
    // Interrupted after step 7: no on_train_end.
  }
  CHECK(latest_checkpoint(backup_dir) == backup_dir + "/backup.ckpt-6.h5");

  BackupAndRestore backup({.backup_dir = backup_dir, .save_freq_steps = 3});
  Trainer trainer;
  TensorBundle state = trainer.state();
  std::optional<ResumePoint> resume = backup.restore(state);
  REQUIRE(resume.has_value());
  CHECK(resume->restored.global_step == 6);
  CHECK(state.global_step == 6);
  CHECK(trainer.weight.at({15}) == 6.0);  // restored in place
  REQUIRE(state.find_blob("iterator") != nullptr);
  CHECK(state.find_blob("iterator")->bytes == "position 192");
  CHECK(state.find_blob("backup_and_restore/epochs") == nullptr);  // internal, not handed back
  trainer.step = state.global_step;
  for (int i = 0; i < 4; ++i) {
    trainer.train_step();
    backup.on_step_end(trainer.state());
  }
  backup.manager().wait();
  CHECK(list_dir(backup_dir) == std::vector<std::string>{"backup.ckpt-9.h5", "checkpoint"});
  backup.on_train_end();
  CHECK_FALSE(fs::exists(backup_dir));

  BackupAndRestore after({.backup_dir = backup_dir, .save_freq_steps = 3});
  TensorBundle fresh = Trainer().state();
  CHECK_FALSE(after.restore(fresh).has_value());
}

TEST_CASE("BackupAndRestore per epoch remembers completed epochs") {
  TempDir dir;
  const std::string backup_dir = dir / "backup";
  {
    BackupAndRestore backup({.backup_dir = backup_dir});
    Trainer trainer;
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      for (int i = 0; i < 5; ++i) {
        trainer.train_step();
        backup.on_step_end(trainer.state());  // no step backups in epoch mode
      }
      backup.on_epoch_end(epoch, trainer.state());
    }
    trainer.train_step();  // interrupted in epoch 2
  }
  BackupAndRestore backup({.backup_dir = backup_dir});
  Trainer trainer;
  TensorBundle state = trainer.state();
  std::optional<ResumePoint> resume = backup.restore(state);
  REQUIRE(resume.has_value());
  CHECK(resume->completed_epochs == 2);
  CHECK(state.global_step == 10);
  CHECK(trainer.weight.at({0}) == 10.0);
  CHECK(list_dir(backup_dir) == std::vector<std::string>{"backup.ckpt-10.h5", "checkpoint"});

  // A kept backup (delete_checkpoint = false) survives on_train_end.
  BackupAndRestore keep({.backup_dir = backup_dir, .delete_checkpoint = false});
  keep.on_train_end();
  CHECK(fs::exists(backup_dir));
  CHECK_THROWS_AS(BackupAndRestore({.backup_dir = ""}), InvalidArgumentError);
  CHECK_THROWS_AS(BackupAndRestore({.backup_dir = backup_dir, .save_freq_steps = -1}),
                  InvalidArgumentError);
}

TEST_CASE("BackupAndRestore on a worker writes nothing into the backup directory") {
  TempDir dir;
  const std::string backup_dir = dir / "backup";
  BackupAndRestore worker(
      {.backup_dir = backup_dir, .save_freq_steps = 1, .is_chief = false, .task_id = 3});
  Trainer trainer;
  trainer.train_step();
  worker.on_step_end(trainer.state());
  worker.on_train_end();
  CHECK((!fs::exists(backup_dir) || list_dir(backup_dir).empty()));
}

TEST_CASE("BackupAndRestore in a multi-worker job: the chief leaves a worker's workertemp_*") {
  // The tasks finish in any order. The chief deletes its backup but not another worker's
  // temporary directory, which that worker may be writing right now; whichever task finishes
  // last removes the empty directory.
  for (bool chief_first : {true, false}) {
    CAPTURE(chief_first);
    TempDir dir;
    const std::string backup_dir = dir / "backup";
    BackupAndRestore chief({.backup_dir = backup_dir, .save_freq_steps = 1, .async = false});
    BackupAndRestore worker({.backup_dir = backup_dir,
                             .save_freq_steps = 1,
                             .is_chief = false,
                             .task_id = 1,
                             .async = false});
    Trainer trainer;
    trainer.train_step();
    chief.on_step_end(trainer.state());
    worker.on_step_end(trainer.state());  // written to workertemp_1, then deleted
    CHECK_FALSE(fs::exists(backup_dir + "/workertemp_1"));
    if (chief_first) {
      // The worker's last backup is still being written when the chief finishes.
      fs::create_directories(backup_dir + "/workertemp_1");
      std::ofstream(backup_dir + "/workertemp_1/backup.ckpt-2.h5.tmp") << "being written";
      chief.on_train_end();
      CHECK(fs::exists(backup_dir + "/workertemp_1/backup.ckpt-2.h5.tmp"));
      CHECK(list_dir(backup_dir) == std::vector<std::string>{"workertemp_1"});
      fs::remove_all(backup_dir + "/workertemp_1");  // the worker's write ends, as its own do
      worker.on_train_end();
    } else {
      worker.on_train_end();  // the chief's backup is still there: the directory stays
      CHECK(fs::exists(backup_dir + "/backup.ckpt-1.h5"));
      chief.on_train_end();
    }
    CHECK_FALSE(fs::exists(backup_dir));
  }
}
