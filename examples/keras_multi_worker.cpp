// TensorFlow's "Multi-worker training with Keras" tutorial
// (tutorials/distribute/multi_worker_with_keras) in C++, line for line where est::keras allows, on
// Fashion-MNIST (examples/keras_tutorial.h holds its mnist_setup.py: mnist_dataset and
// build_and_compile_cnn_model). Every process reads its role from TF_CONFIG:
//
//   export EST_JOB_TOKEN=<the same secret for every task>
//   TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
//               "task": {"type": "worker", "index": 0}}' build/examples/keras_multi_worker &
//   TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
//               "task": {"type": "worker", "index": 1}}' build/examples/keras_multi_worker
//
// Without TF_CONFIG it trains alone. The dataset's batch is the global batch (64 per worker);
// each worker keeps its rows of every global batch (auto-shard by data) and the job takes the
// same steps as one process with that global batch. Only the chief prints Keras's lines:
//
//   Epoch 1/3
//   70/70 [==============================] - 4s 55ms/step - loss: 2.2401 - accuracy: 0.2154
//
// Then, as the tutorial: model.save(write_filepath(model_path)) (the chief writes model_path,
// the other workers a copy under workertemp_<task_id> beside it, then delete it), every worker
// loads model_path and fits the loaded model alone for 2 epochs of 20 steps, and a
// keras::Checkpoint of the model is saved by a CheckpointManager (max_to_keep 1; the same
// write_filepath rule) and restored from latest_checkpoint (by the chief: est's restore writes
// the model's model_dir, which is the chief's). fit backs up into --backup_dir every 30 batches
// (BackupAndRestore), so a job whose worker died resumes where the last backup left it.
//
//   keras_multi_worker [--model_path PATH.keras] [--model_dir DIR] [--backup_dir DIR]
//                      [--checkpoint_dir DIR] [--epochs N] [--steps_per_epoch N]
//                      [--per_worker_batch_size B]
// (--model_dir, est's: where fit keeps its checkpoints; the chief's is the job's, and every
// worker must see it. --epochs, --steps_per_epoch and --per_worker_batch_size default to the
// tutorial's 3, 70 and 64.)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <est/est.h>

#include "examples/keras_tutorial.h"

namespace {

// The tutorial's write_filepath: the chief writes `filepath`, another worker
// <dirname>/workertemp_<task_id>/<basename> (the directory created here, as the tutorial's
// _get_temp_dir does).
std::string write_filepath(const std::string& filepath, bool is_chief, int task_id) {
  std::filesystem::path path(filepath);
  std::filesystem::path dir = path.parent_path();
  if (!is_chief) dir /= "workertemp_" + std::to_string(task_id);
  if (!dir.empty()) std::filesystem::create_directories(dir);
  return (dir / path.filename()).string();
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_path = "/tmp/keras-model.keras", model_dir, backup_dir = "/tmp/backup",
              checkpoint_dir = "/tmp/ckpt";
  int epochs = 3;
  int64_t steps_per_epoch = 70, per_worker_batch_size = 64;
  CLI::App app("The Keras multi-worker tutorial on Fashion-MNIST (TF_CONFIG).",
               "keras_multi_worker");
  app.add_option("--model_path", model_path, "where the chief saves the model")
      ->capture_default_str();
  app.add_option("--model_dir", model_dir, "fit's checkpoints (default: a temporary directory)");
  app.add_option("--backup_dir", backup_dir, "BackupAndRestore's backups")->capture_default_str();
  app.add_option("--checkpoint_dir", checkpoint_dir, "the CheckpointManager's directory")
      ->capture_default_str();
  app.add_option("--epochs", epochs, "epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps_per_epoch", steps_per_epoch, "steps per epoch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--per_worker_batch_size", per_worker_batch_size, "batch per worker")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // strategy = tf.distribute.MultiWorkerMirroredStrategy()  (reads TF_CONFIG)
  auto strategy = est::distribute::MultiWorkerMirroredStrategy::from_env();
  int num_workers = strategy->num_workers();

  // global_batch_size = per_worker_batch_size * num_workers
  int64_t global_batch_size = per_worker_batch_size * num_workers;
  est::data::Dataset multi_worker_dataset = examples::mnist_dataset(global_batch_size);

  // with strategy.scope(): multi_worker_model = mnist_setup.build_and_compile_cnn_model()
  auto multi_worker_model = examples::build_and_compile_cnn_model(strategy, model_dir);

  // callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir='/tmp/backup', save_freq=30)]
  // multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=70,
  //                        callbacks=callbacks)
  est::keras::Callbacks callbacks{
      std::make_shared<est::keras::BackupAndRestore>(backup_dir, int64_t{30})};
  est::keras::History history = multi_worker_model->fit(
      multi_worker_dataset,
      {.epochs = epochs, .steps_per_epoch = steps_per_epoch, .callbacks = callbacks});

  // task_type, task_id = (strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id)
  bool is_chief = strategy->is_chief();
  int task_id = strategy->worker_index();
  strategy->barrier("fit's last checkpoint");  // the chief's is on disk before anyone reads it

  // write_model_path = write_filepath(model_path, task_type, task_id)
  // multi_worker_model.save(write_model_path)
  // if not _is_chief(task_type, task_id): tf.io.gfile.rmtree(os.path.dirname(write_model_path))
  std::string write_model_path = write_filepath(model_path, is_chief, task_id);
  multi_worker_model->save(write_model_path);
  if (!is_chief) std::filesystem::remove_all(std::filesystem::path(write_model_path).parent_path());
  strategy->barrier("model.save");  // the chief's file exists before the workers load it

  // loaded_model = tf.keras.models.load_model(model_path)
  // loaded_model.fit(single_worker_dataset, epochs=2, steps_per_epoch=20)  (alone, no strategy)
  // The loaded model is outside strategy.scope(): it trains alone in this process, so its
  // Estimator must not read the TF_CONFIG that names the job (the strategy has read it).
  ::unsetenv("TF_CONFIG");
  std::unique_ptr<est::keras::Model> loaded_model = est::keras::load_model(model_path);
  loaded_model->fit(multi_worker_dataset, {.epochs = 2, .steps_per_epoch = 20});

  // checkpoint = tf.train.Checkpoint(model=multi_worker_model)
  // write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
  // checkpoint_manager = tf.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir,
  //                                                 max_to_keep=1)
  // checkpoint_manager.save()
  // if not _is_chief(task_type, task_id): tf.io.gfile.rmtree(write_checkpoint_dir)
  est::keras::Checkpoint checkpoint({.model = multi_worker_model.get()});
  std::string write_checkpoint_dir = write_filepath(checkpoint_dir, is_chief, task_id);
  est::keras::CheckpointManager checkpoint_manager(checkpoint, write_checkpoint_dir,
                                                   /*max_to_keep=*/1);
  checkpoint_manager.save();
  // (the tutorial removes write_checkpoint_dir and leaves its empty workertemp_<id>; here both go)
  if (!is_chief)
    std::filesystem::remove_all(std::filesystem::path(write_checkpoint_dir).parent_path());
  strategy->barrier("checkpoint_manager.save");

  // latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
  // checkpoint.restore(latest_checkpoint)
  std::optional<std::string> latest_checkpoint = est::keras::latest_checkpoint(checkpoint_dir);
  if (!latest_checkpoint)
    throw est::NotFoundError("no checkpoint in " + checkpoint_dir + " after the chief's save");
  if (is_chief) checkpoint.restore(*latest_checkpoint);
  strategy->barrier("checkpoint.restore");

  if (strategy->is_chief())
    fmt::print(
        "Trained {} epochs of {} steps on {} worker(s), global batch {}: loss {:.4f} -> "
        "{:.4f}, accuracy {:.4f} -> {:.4f}\n",
        epochs, steps_per_epoch, num_workers, global_batch_size, history["loss"].front(),
        history["loss"].back(), history["accuracy"].front(), history["accuracy"].back());
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
