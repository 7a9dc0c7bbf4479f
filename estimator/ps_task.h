// The `ps` task of train_and_evaluate (internal to estimator/): TF1's parameter server, which
// in TensorFlow runs `server.join()` (tensorflow_estimator's training.py, _TrainingExecutor's
// run_ps) and serves the variables that replica_device_setter placed on it.
//
// Here the task serves the variables the workers place on it (distribute/ps/ps_server.h) and
// applies their updates with the job's optimizer. The optimizer is the one model_fn's train op
// uses: the task calls model_fn once in TRAIN mode on the first batch of input_fn, in a scratch
// store that is then dropped (in TensorFlow the optimizer's ops are part of the graph the
// workers send), so a learning-rate schedule and every hyperparameter are the job's own. It
// then serves on its TF_CONFIG address, carrying the job token, until the job ends (the chief
// says so, or every chief and worker said it is done), and returns; a job that failed makes it
// throw the error another task reported. TensorFlow's ps joins forever (tensorflow#25858).
#pragma once

#include "estimator/estimator.h"
#include "estimator/specs.h"

namespace est::detail {

// Serves until the job ends. InvalidArgumentError when this task is not a ps task of the
// cluster, UnavailableError when its address cannot be bound.
void run_parameter_server(const Estimator& estimator, const TrainSpec& train_spec);

}  // namespace est::detail
