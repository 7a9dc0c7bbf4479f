// ServingInputReceiver, build_raw_serving_input_receiver_fn and
// build_parsing_serving_input_receiver_fn (tf.estimator.export): what a served model receives,
// and how it becomes model_fn's features. Followed: tensorflow/estimator's
// python/estimator/export/export.py.
//
// TensorFlow's receiver holds placeholders; here a receiver tensor is a TensorSpec (its shape
// with -1 for the batch dimension) and the graph from receiver tensors to features is an
// ordinary function of tensors, traced into the export with model_fn. Without features_fn the
// receiver tensors are the features (TF's raw receiver).
//
// Parsing serialized tf.Examples has no ONNX form, so a parsing receiver (feature_spec set) is
// exported as a documented pre-processing step instead of graph ops: the ONNX graph's inputs
// are the parsed features, and the signatures name the string input and the feature spec
// ("parse_example" in signatures.json), which est-serve applies (data::parse_example) before
// it runs the graph. Its features_fn (the parse, for Estimator users who call it directly) is
// not traced.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "data/element.h"
#include "data/example.h"
#include "ops/tensor.h"

namespace est {

struct TensorSpec {
  Shape shape;  // the first dimension -1: any batch size
  DType dtype = DType::kF32;
};

struct ServingInputReceiver {
  std::map<std::string, TensorSpec> receiver_tensors;  // what a request carries, by name
  std::function<Features(const Features& receiver_tensors)> features_fn;  // empty: identity
  // Set: receiver_tensors is one string tensor [batch] of serialized tf.Examples, parsed with
  // this spec into the features (fixed-length float32, int64 or string features for an
  // export); features_fn is then that parse.
  std::optional<data::FeatureSpecs> feature_spec;
};

using ServingInputReceiverFn = std::function<ServingInputReceiver()>;

// The receiver whose tensors are `features` themselves, each with its first dimension made
// `default_batch_size` (unset: -1, any batch size). InvalidArgumentError for a scalar spec.
ServingInputReceiverFn build_raw_serving_input_receiver_fn(
    std::map<std::string, TensorSpec> features, std::optional<int64_t> default_batch_size = {});

// The receiver of serialized tf.Examples under the name "examples" (string [batch], the batch
// `default_batch_size` or any), parsed with `feature_spec` (TF's parse_example) into the
// features. InvalidArgumentError for an empty spec.
ServingInputReceiverFn build_parsing_serving_input_receiver_fn(
    data::FeatureSpecs feature_spec, std::optional<int64_t> default_batch_size = {});

}  // namespace est
