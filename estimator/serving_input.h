// ServingInputReceiver and build_raw_serving_input_receiver_fn (tf.estimator.export): what a
// served model receives, and how it becomes model_fn's features. Followed:
// tensorflow/estimator's python/estimator/export/export.py.
//
// TensorFlow's receiver holds placeholders; here a receiver tensor is a TensorSpec (its shape
// with -1 for the batch dimension) and the graph from receiver tensors to features is an
// ordinary function of tensors, traced into the export with model_fn. Without features_fn the
// receiver tensors are the features (TF's raw receiver).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "data/element.h"
#include "ops/tensor.h"

namespace est {

struct TensorSpec {
  Shape shape;  // the first dimension -1: any batch size
  DType dtype = DType::kF32;
};

struct ServingInputReceiver {
  std::map<std::string, TensorSpec> receiver_tensors;  // what a request carries, by name
  std::function<Features(const Features& receiver_tensors)> features_fn;  // empty: identity
};

using ServingInputReceiverFn = std::function<ServingInputReceiver()>;

// The receiver whose tensors are `features` themselves, each with its first dimension made
// `default_batch_size` (unset: -1, any batch size). InvalidArgumentError for a scalar spec.
ServingInputReceiverFn build_raw_serving_input_receiver_fn(
    std::map<std::string, TensorSpec> features, std::optional<int64_t> default_batch_size = {});

}  // namespace est
