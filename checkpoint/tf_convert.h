// Converting checkpoints between est's HDF5 format and TensorFlow's V2 format (tensor bundle),
// what `est-ckpt convert SRC DST --to tf|est` runs.
//
// Names carry over unchanged: est's variables and slots already have TF1's names
// (`dnn/hiddenlayer_0/kernel`, `.../Adagrad`, `.../Ftrl_1`, `global_step` as an int64 scalar),
// so a TensorFlow program reads the converted bundle with tf.train.load_checkpoint or
// warm-starts from it, and est restores a converted TF checkpoint as its own.
//
//   to TensorFlow: SRC is est's checkpoint file or model directory (its latest); DST is the
//     bundle's prefix (DST.index + DST.data-00000-of-00001). est's blobs (input position, RNG
//     state) have no TensorFlow counterpart and are left out (counted in the result).
//   to est: SRC is a TF checkpoint prefix, its .index, a directory with a `checkpoint` state
//     file or a SavedModel directory; DST ending in `.h5` is the file written, otherwise DST is
//     a model directory (new or empty) that receives model.ckpt-<global_step>.h5 and a state
//     file naming it, so that an Estimator with that model_dir resumes from it. A TF bundle
//     does not record which variables are trainable: all are written trainable but
//     global_step; a name that extends another's ("<var>/Adagrad") is written as a slot.
//
// Errors name the path and what to do: NotFoundError for a missing SRC, DataLossError for a
// damaged one (as the readers raise them), AlreadyExistsError for a DST that exists,
// UnimplementedError / InvalidArgumentError for a dtype the other format cannot hold, and
// InvalidArgumentError for a SRC already in the target format.
#pragma once

#include <cstdint>
#include <string>

namespace est::checkpoint {

struct ConvertResult {
  std::string written;    // the prefix or file written
  size_t tensors = 0;     // tensors converted
  size_t blobs_left = 0;  // est blobs with no TensorFlow counterpart (to TensorFlow only)
  int64_t global_step = 0;
};

ConvertResult convert_to_tf(const std::string& source, const std::string& prefix);
ConvertResult convert_to_est(const std::string& source, const std::string& destination);

}  // namespace est::checkpoint
