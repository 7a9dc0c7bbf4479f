// TF Serving's :classify and :regress (api_rest.md; its json_tensor.cc names the answer's key
// "results"), apart from the REST API's routing (rest_api.h): which signatures answer them, and
// the answers made from a signature's outputs for a batch of examples:
//   classify  {"results": [[[label, score], ...], ...]}: per example the pairs of the outputs
//             "classes" (string labels, or integer ids as their decimal strings; "" without
//             it) and "scores" (0 without it), each [batch] or [batch, k];
//   regress   {"results": [value, ...]}: the output "outputs", one value per example.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "export/servable.h"

namespace est::serving {

// InvalidArgumentError unless `signature` answers `verb` ("classify" or "regress"): its
// method_name is tensorflow/serving/<verb> and it takes serialized tf.Examples.
void check_answers(const SignatureDef& signature, const std::string& signature_name,
                   const std::string& verb);

// The answers from `outputs` (the graph's, by ONNX name) of `signature` run on `batch`
// examples; InvalidArgumentError for an output of another shape.
nlohmann::json classify_results(const SignatureDef& signature, const NamedTensors& outputs,
                                int64_t batch);
nlohmann::json regress_results(const SignatureDef& signature, const std::string& signature_name,
                               const NamedTensors& outputs, int64_t batch);

}  // namespace est::serving
