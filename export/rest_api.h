// TensorFlow Serving's REST API (tensorflow_serving/g3doc/api_rest.md) over a ModelManager,
// independent of the HTTP library (tools/est_serve.cpp puts it behind cpp-httplib):
//   GET  /v1/models/NAME[/versions/V]            -> {"model_version_status": [...]} (AVAILABLE,
//        or END with the error of a version whose load failed)
//   GET  /v1/models/NAME[/versions/V]/metadata   -> {"model_spec": ..., "metadata":
//                                                    {"signature_def": ...}}
//   POST /v1/models/NAME[/versions/V]:predict    with {"signature_name"?, "instances": [...]}
//        (row format, answered {"predictions": [...]}) or {"inputs": ...} (columnar, answered
//        {"outputs": ...}); a single input or output is given without its name, as TF does.
//        DT_STRING values are JSON strings or {"b64": "..."} (bytes, base64).
//   POST ...:classify / ...:regress              with {"signature_name"?, "context"?,
//        "examples": [{feature: value or list}, ...]} on a signature of that method, answered
//        {"results": [[[label, score], ...], ...]} or {"results": [value, ...]}.
// A signature with a parse_example step (a parsing serving input receiver) gets serialized
// tf.Examples, parsed with its feature spec before the graph runs (parse_example_step.h); one
// with lookups (a feature-column model's vocabulary, hash and identity lookups) takes the raw
// features and looks them up into the graph's id inputs first (lookup_step.h).
// Paths are matched as TF Serving's http_rest_api_util.cc does (case-insensitive; a version
// label is resolved with the model's version_labels). Bodies are JSON text as
// rest_json_text.h reads it (NaN and infinities; nesting bounded), and answers are written so;
// a :predict body of plain numbers is read, and every :predict answer written, without a DOM
// (rest_predict.h), to the same bytes.
// Errors are {"error": "..."} with the HTTP status of the error's cause: 400 for a malformed
// path under /v1/ or body, a version label, a tensor of the wrong shape or dtype, an unparsable
// example, an unknown signature or one of another method; 404 for an unknown model or version,
// a model with no version loaded, or a path outside /v1/; 500 otherwise. A client's text in a
// message has its control characters written as \xNN. Nothing a client sends can crash the
// server.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "export/batcher.h"
#include "export/server_core.h"

namespace est::serving {

struct RestResponse {
  int status = 200;
  std::string body;                 // JSON
  std::optional<StatusCode> error;  // the error's code (the metrics' status); none: OK
};

// The model of a name (null: none), as the server looks it up.
using ModelLookup = std::function<std::shared_ptr<const ModelManager>(const std::string&)>;

// `batcher`, when given, runs concurrent predict requests together (batcher.h).
RestResponse handle_rest(const ModelLookup& models, const std::string& method,
                         const std::string& path, const std::string& body,
                         Batcher* batcher = nullptr);
// The same for the models of `core`, or for one model.
RestResponse handle_rest(const ServerCore& core, const std::string& method, const std::string& path,
                         const std::string& body, Batcher* batcher = nullptr);
RestResponse handle_rest(const ModelManager& model, const std::string& method,
                         const std::string& path, const std::string& body,
                         Batcher* batcher = nullptr);

// Shared with the gRPC API (export/grpc/): serialized tf.Examples parsed with a signature's
// parse_example step (InvalidArgumentError for a bad example), and the graph's outputs for a
// signature's inputs (after its lookups; through `batcher` when there is one).
NamedTensors parse_examples(const ParseExampleStep& step, const Tensor& serialized);
NamedTensors run_graph(const Servable& servable, const std::string& signature_name,
                       const NamedTensors& features, Batcher* batcher);
// run_graph through `batcher` without waiting (Batcher::run_async): `done` gets the outputs or
// the error, the servable held until then.
void run_graph_async(std::shared_ptr<const Servable> servable, const std::string& signature_name,
                     const NamedTensors& features, Batcher& batcher, Batcher::DoneFn done);

// The HTTP status TF Serving answers for an error of `code`.
int http_status_of(StatusCode code);

}  // namespace est::serving
