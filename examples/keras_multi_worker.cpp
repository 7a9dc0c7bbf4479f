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
//   keras_multi_worker [--model_path PATH] [--model_dir DIR] [--epochs N] [--steps_per_epoch N]
//                      [--per_worker_batch_size B]
// (--model_dir, est's: where fit keeps its checkpoints; the chief's is the job's. --epochs,
// --steps_per_epoch and --per_worker_batch_size default to the tutorial's 3, 70 and 64.)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include <est/est.h>

#include "examples/keras_tutorial.h"

int main(int argc, char** argv) try {
  std::string model_path = "/tmp/keras-model", model_dir;
  int epochs = 3;
  int64_t steps_per_epoch = 70, per_worker_batch_size = 64;
  CLI::App app("The Keras multi-worker tutorial on Fashion-MNIST (TF_CONFIG).",
               "keras_multi_worker");
  app.add_option("--model_path", model_path, "where the chief saves the model")
      ->capture_default_str();
  app.add_option("--model_dir", model_dir, "fit's checkpoints (default: a temporary directory)");
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

  // TODO(merge): callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir='/tmp/backup')]
  // multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=70)
  est::keras::History history = multi_worker_model->fit(
      multi_worker_dataset, {.epochs = epochs, .steps_per_epoch = steps_per_epoch});

  // TODO(merge): model.save(write_filepath(model_path, task_type, task_id)): the chief writes
  // model_path, the other workers workertemp_<id> beside it (then deleted); then
  // load_model(model_path).fit(...), and tf.train.Checkpoint / CheckpointManager.
  (void)model_path;

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
