// Initialising a variable from another checkpoint's tensor, as embedding_column's
// ckpt_to_load_from / tensor_name_in_ckpt do in TensorFlow (feature_column_v2.py passes them to
// checkpoint_utils.init_from_checkpoint, which replaces the variable's initializer): the
// variable takes the tensor when it is created, and a restore of the model's own checkpoint
// later overwrites it as usual.
//
// It is an nn::Initializer rather than two fields of EmbeddingColumnOptions because
// feature_column/ sits below checkpoint/: TF's
//   embedding_column(ids, 8, ckpt_to_load_from=path, tensor_name_in_ckpt=name)
// is here
//   embedding_column(ids, 8, {.initializer = checkpoint::initializer_from_checkpoint(path, name)})
#pragma once

#include <string>

#include "nn/initializers.h"

namespace est::checkpoint {

// The tensor `tensor_name_in_ckpt` of `ckpt_to_load_from` (est's checkpoint file or a model
// directory: its latest checkpoint; or TensorFlow's checkpoint prefix, a directory naming one,
// or a SavedModel directory: source.h), read when the variable is created. Both must be given
// (InvalidArgumentError, as TF requires both or neither); a missing file or tensor is a
// NotFoundError; a tensor of another shape or dtype than the variable an InvalidArgumentError
// naming both.
nn::Initializer initializer_from_checkpoint(std::string ckpt_to_load_from,
                                            std::string tensor_name_in_ckpt);

}  // namespace est::checkpoint
