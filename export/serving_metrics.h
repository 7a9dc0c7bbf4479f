// TF Serving's metrics (names, labels and buckets as TF Serving and TensorFlow define them),
// recorded by est-serve for --monitoring_config_file's Prometheus page (metrics.h writes it):
//   /tensorflow/serving/request_count {model_name, status}: every request of the REST API's
//       /v1/models/... paths and of gRPC's Predict, Classify and Regress, with its status's
//       code name ("OK", "NOT_FOUND", ...) (servables/tensorflow/util.cc);
//   /tensorflow/serving/request_latency {model_name, API, entrypoint}: microseconds of each
//       successful request; API "predict"/"classify"/"regress" (or "" for status and metadata)
//       and entrypoint "REST" from the REST API (model_servers/http_server.cc), "Predict"/
//       "Classify"/"Regress" and "GRPC" from gRPC (prediction_service_impl.cc);
//   /tensorflow/serving/runtime_latency {model_name, API, runtime}: microseconds the graph ran,
//       API "Predict"/"Classify"/"Regress" after the signature's method, runtime "est" (TF
//       Serving writes "TF1" or "TFRT" for its runtimes);
//   /tensorflow/serving/batching_session/{queuing_latency {thread_pool_name}, wrapped_run_count,
//       input_batch_size, processed_batch_size, padding_size {execution_batch_size}}
//       (batching/batching_session.cc, batching_util.h);
//   /tensorflow/cc/saved_model/load_attempt_count {model_path, status "success"/"fail"},
//       /tensorflow/cc/saved_model/load_latency {model_path} (TensorFlow's
//       cc/saved_model/loader.cc), each version's load;
//   /tensorflow/serving/model_warmup_latency, model_warmup_records_read {model_path, status}
//       (servables/tensorflow/saved_model_warmup_util.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "export/metrics.h"

namespace est::serving {

// The process's registry of the metrics above.
metrics::Registry& serving_metrics();

// A request answered with status `status` (a code name; "OK"), its latency recorded when OK.
void record_request(const std::string& model_name, std::string_view status, const std::string& api,
                    const std::string& entrypoint, int64_t micros);
// The graph of a signature of `method_name` (TF's "tensorflow/serving/predict", ...) ran.
void record_runtime(const std::string& model_name, const std::string& method_name, int64_t micros);
// A version's load (and warmup, when on) under `model_path` ended.
void record_load(const std::string& model_path, bool success, int64_t micros);
void record_warmup(const std::string& model_path, std::string_view status, int64_t records,
                   int64_t micros);
// A batch of `rows` rows (of requests that waited `queued_micros` each) run as `padded_rows`.
void record_batch_request(const std::string& thread_pool_name, int64_t queued_micros);
void record_batch(int64_t rows, int64_t padded_rows);

// The model name and API of a REST path as TF Serving's REST dispatcher reads them
// (http_rest_api_handler.cc's path pattern, case-insensitive: /v1/models/NAME, then
// /versions/N or /labels/L, then :classify, :regress or :predict, then /metadata); nullopt for
// a path outside it, which TF Serving does not count.
struct RestRequestLabels {
  std::string model_name;
  std::string api;
};
std::optional<RestRequestLabels> rest_request_labels(std::string_view path);

// Microseconds since `start` on the steady clock.
int64_t micros_since(int64_t start_micros);
int64_t now_micros();

}  // namespace est::serving
