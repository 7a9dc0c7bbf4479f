// TF Serving's metrics and their recording (see serving_metrics.h). Followed: TF Serving's
// servables/tensorflow/util.cc, model_servers/http_server.cc and prediction_service_impl.cc,
// batching/batching_session.cc and batching_util.h, saved_model_warmup_util.cc; TensorFlow's
// cc/saved_model/loader.cc; http_rest_api_handler.cc's kPathRegex.
#include "export/serving_metrics.h"

#include <cctype>
#include <chrono>

namespace est::serving {

namespace {

using metrics::Descriptor;
using metrics::Kind;

// Scale 10, growth 1.8, 33 buckets (about 20 minutes in microseconds): TF Serving's latencies.
std::vector<double> latency_buckets() { return metrics::exponential_buckets(10, 1.8, 33); }
std::vector<double> batch_size_buckets() { return metrics::exponential_buckets(1, 2, 14); }

const char* const kRequestCount = "/tensorflow/serving/request_count";
const char* const kRequestLatency = "/tensorflow/serving/request_latency";
const char* const kRuntimeLatency = "/tensorflow/serving/runtime_latency";
const char* const kQueuingLatency = "/tensorflow/serving/batching_session/queuing_latency";
const char* const kWrappedRunCount = "/tensorflow/serving/batching_session/wrapped_run_count";
const char* const kInputBatchSize = "/tensorflow/serving/batching_session/input_batch_size";
const char* const kProcessedBatchSize = "/tensorflow/serving/batching_session/processed_batch_size";
const char* const kPaddingSize = "/tensorflow/serving/batching_session/padding_size";
const char* const kLoadAttemptCount = "/tensorflow/cc/saved_model/load_attempt_count";
const char* const kLoadLatency = "/tensorflow/cc/saved_model/load_latency";
const char* const kWarmupLatency = "/tensorflow/serving/model_warmup_latency";
const char* const kWarmupRecordsRead = "/tensorflow/serving/model_warmup_records_read";

// The prefix of `text` equal to `prefix` ignoring case, consumed.
bool consume(std::string_view& text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// The characters up to the next '/' or ':', consumed (empty when none).
std::string_view segment(std::string_view& text) {
  const size_t end = std::min(text.find_first_of("/:"), text.size());
  std::string_view out = text.substr(0, end);
  text.remove_prefix(end);
  return out;
}

}  // namespace

metrics::Registry& serving_metrics() {
  static metrics::Registry registry({
      {kRequestCount, Kind::kCounter, {"model_name", "status"}, {}},
      {kRequestLatency, Kind::kHistogram, {"model_name", "API", "entrypoint"}, latency_buckets()},
      {kRuntimeLatency, Kind::kHistogram, {"model_name", "API", "runtime"}, latency_buckets()},
      {kQueuingLatency,
       Kind::kHistogram,
       {"thread_pool_name"},
       metrics::exponential_buckets(100, 1.2, 52)},
      {kWrappedRunCount, Kind::kCounter, {}, {}},
      {kInputBatchSize, Kind::kHistogram, {}, batch_size_buckets()},
      {kProcessedBatchSize, Kind::kHistogram, {}, batch_size_buckets()},
      {kPaddingSize, Kind::kHistogram, {"execution_batch_size"}, batch_size_buckets()},
      {kLoadAttemptCount, Kind::kCounter, {"model_path", "status"}, {}},
      {kLoadLatency, Kind::kCounter, {"model_path"}, {}},
      {kWarmupLatency, Kind::kHistogram, {"model_path", "status"}, latency_buckets()},
      {kWarmupRecordsRead, Kind::kCounter, {"model_path", "status"}, {}},
  });
  return registry;
}

void record_request(const std::string& model_name, std::string_view status, const std::string& api,
                    const std::string& entrypoint, int64_t micros) {
  if (status == "OK")
    serving_metrics().observe(kRequestLatency, {model_name, api, entrypoint},
                              static_cast<double>(micros));
  serving_metrics().increment(kRequestCount, {model_name, std::string(status)});
}

void record_runtime(const std::string& model_name, const std::string& method_name, int64_t micros) {
  std::string api = "Predict";
  if (method_name == "tensorflow/serving/classify") api = "Classify";
  if (method_name == "tensorflow/serving/regress") api = "Regress";
  serving_metrics().observe(kRuntimeLatency, {model_name, api, "est"}, static_cast<double>(micros));
}

void record_load(const std::string& model_path, bool success, int64_t micros) {
  serving_metrics().increment(kLoadAttemptCount, {model_path, success ? "success" : "fail"});
  if (success) serving_metrics().increment(kLoadLatency, {model_path}, micros);
}

void record_warmup(const std::string& model_path, std::string_view status, int64_t records,
                   int64_t micros) {
  const std::vector<std::string> labels{model_path, std::string(status)};
  serving_metrics().observe(kWarmupLatency, labels, static_cast<double>(micros));
  serving_metrics().increment(kWarmupRecordsRead, labels, records);
}

void record_batch_request(const std::string& thread_pool_name, int64_t queued_micros) {
  serving_metrics().observe(kQueuingLatency, {thread_pool_name},
                            static_cast<double>(queued_micros));
}

void record_batch(int64_t rows, int64_t padded_rows) {
  metrics::Registry& registry = serving_metrics();
  registry.increment(kWrappedRunCount, {});
  registry.observe(kInputBatchSize, {}, static_cast<double>(rows));
  registry.observe(kProcessedBatchSize, {}, static_cast<double>(padded_rows));
  registry.observe(kPaddingSize, {std::to_string(padded_rows)},
                   static_cast<double>(padded_rows - rows));
}

std::optional<RestRequestLabels> rest_request_labels(std::string_view path) {
  if (!consume(path, "/v1/models/")) return std::nullopt;
  RestRequestLabels labels{std::string(segment(path)), ""};
  if (labels.model_name.empty()) return std::nullopt;
  if (consume(path, "/versions/")) {
    const std::string_view digits = segment(path);
    if (digits.empty()) return std::nullopt;
    for (const char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  } else if (consume(path, "/labels/")) {
    if (segment(path).empty()) return std::nullopt;
  }
  if (!path.empty() && path[0] == ':') {
    path.remove_prefix(1);
    const std::string_view api = segment(path);
    std::string lower;
    for (const char c : api)
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower != "classify" && lower != "regress" && lower != "predict") return std::nullopt;
    labels.api = std::string(api);
  }
  consume(path, "/metadata");
  if (!path.empty()) return std::nullopt;
  return labels;
}

int64_t now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t micros_since(int64_t start_micros) { return now_micros() - start_micros; }

}  // namespace est::serving
