// The pre-processing step of a parsing serving signature, as signatures.json holds it: which
// string input carries serialized tf.Examples and the feature spec they are parsed with
// (data::parse_example), so that est-serve parses requests as the exported model_fn's input
// receiver did (estimator/serving_input.h says why parsing is not part of the ONNX graph).
//
//   "parse_example": {"input": "examples",
//                     "features": {"x": {"dtype": "DT_FLOAT", "shape": [2],
//                                        "default_value": [0.0, 0.0]}}}
//
// Only fixed-length features (float32, int64, string) are written: what the graph takes as
// dense inputs. default_value holds the feature's default (numbers, or strings for DT_STRING);
// absent, a missing feature is an error, as in TF.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "data/example.h"

namespace est::serving {

struct ParseExampleStep {
  std::string input;  // the signature input key of the serialized examples
  data::FeatureSpecs features;
};

// UnimplementedError naming the feature for what the export cannot write (a VarLenFeature,
// uint8 bytes).
nlohmann::json to_json(const ParseExampleStep& step);
// DataLossError naming the field when malformed.
ParseExampleStep parse_example_step_from_json(const nlohmann::json& json);

}  // namespace est::serving
