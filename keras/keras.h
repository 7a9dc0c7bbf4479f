// est::keras: Keras-style models (tf.keras, Keras 2.x semantics) on est's Estimator.
//
//   auto model = keras::Sequential({keras::layers::InputLayer({.shape = {28, 28}}),
//                                   keras::layers::Reshape({28, 28, 1}),
//                                   keras::layers::Conv2D({.filters = 32, .kernel_size = 3,
//                                                          .activation = "relu"}),
//                                   keras::layers::Flatten(),
//                                   keras::layers::Dense({.units = 128, .activation = "relu"}),
//                                   keras::layers::Dense({.units = 10})});
//   model.compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.001}),
//                  .loss = keras::losses::SparseCategoricalCrossentropy(true),
//                  .metrics = {"accuracy"}});
//   keras::History history = model.fit(dataset, {.epochs = 3, .steps_per_epoch = 70});
//
// layers.h: the layers and the functional API (Input, layers called on KerasTensors);
// model.h: Model / Sequential, summary, compile/fit/evaluate/predict (and how strategies,
// callbacks and save/load_model plug in); compile.h: losses, optimizers, metrics (and their
// per-output structures); data_adapter.h: (x, y) for several inputs or outputs;
// callbacks.h: Callback, History, ProgbarLogger; early_stopping.h, model_checkpoint.h: those
// callbacks; checkpoint.h: Checkpoint, CheckpointManager; progbar.h: Keras's progress output;
// the callbacks BackupAndRestore, TensorBoard, ReduceLROnPlateau, LearningRateScheduler,
// CSVLogger and TerminateOnNaN each in its own header.
#pragma once

#include "keras/backup_and_restore.h"
#include "keras/callbacks.h"
#include "keras/checkpoint.h"
#include "keras/compile.h"
#include "keras/csv_logger.h"
#include "keras/data_adapter.h"
#include "keras/early_stopping.h"
#include "keras/layers.h"
#include "keras/learning_rate_scheduler.h"
#include "keras/model.h"
#include "keras/model_checkpoint.h"
#include "keras/model_to_estimator.h"
#include "keras/progbar.h"
#include "keras/reduce_lr_on_plateau.h"
#include "keras/tensorboard.h"
#include "keras/terminate_on_nan.h"
