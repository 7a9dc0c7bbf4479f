// Model warmup from assets.extra/tf_serving_warmup_requests (see warmup.h). Followed: TF
// Serving's servables/tensorflow/saved_model_warmup_util.cc (the file's name and location, the
// record limit, the errors) and saved_model_warmup.cc (the log types run).
#include "export/grpc/warmup.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/tfrecord.h"
#include "export/grpc/service_util.h"
#include "export/grpc/services.h"
#include "export/serving_metrics.h"
#include "ops/logging.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace est::serving {
namespace {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;

constexpr int kMaxRecords = 1000;  // WarmupConsts::kMaxNumRecords

void run_record(const Servable& servable, Batcher* batcher, const tfs::PredictionLog& log) {
  switch (log.log_type_case()) {
    case tfs::PredictionLog::kPredictLog: {
      tfs::PredictResponse response;
      predict(servable, log.predict_log().request(), batcher, response);
      break;
    }
    case tfs::PredictionLog::kClassifyLog: {
      const auto& request = log.classify_log().request();
      tfs::ClassificationResult result;
      classify(servable, signature_name_of(request.model_spec()), request.input(), batcher, result);
      break;
    }
    case tfs::PredictionLog::kRegressLog: {
      const auto& request = log.regress_log().request();
      tfs::RegressionResult result;
      regress(servable, signature_name_of(request.model_spec()), request.input(), batcher, result);
      break;
    }
    case tfs::PredictionLog::kMultiInferenceLog: {
      tfs::MultiInferenceResponse response;
      multi_inference(servable, log.multi_inference_log().request(), batcher, response);
      break;
    }
    case tfs::PredictionLog::kPredictStreamedLog:
    case tfs::PredictionLog::kSessionRunLog:
      throw UnimplementedError(fmt::format("Unsupported log_type for warmup: {}",
                                           static_cast<int>(log.log_type_case())));
    default:
      break;
  }
}

}  // namespace

void run_warmup(const Servable& servable, Batcher* batcher, int iterations) {
  const std::string path =
      (fs::path(servable.path) / "assets.extra" / "tf_serving_warmup_requests").string();
  std::error_code missing;
  if (!fs::exists(path, missing)) {
    log::info("No warmup data file found at {}", path);
    return;
  }
  log::info("Starting to read warmup data for model at {}", path);
  const int64_t start = now_micros();
  int64_t records = 0;
  try {
    data::TFRecordReader reader(path);
    std::string record;
    while (reader.read(record)) {
      tfs::PredictionLog log;
      if (!log.ParseFromString(record))
        throw InvalidArgumentError(
            fmt::format("Failed to parse warmup record {} ({} bytes) from {}: not a PredictionLog",
                        records, record.size(), path));
      for (int i = 0; i < iterations; ++i) run_record(servable, batcher, log);
      if (++records > kMaxRecords)
        throw InvalidArgumentError(fmt::format(
            "Number of warmup records exceeds the maximum ({}) at {}", kMaxRecords, path));
    }
  } catch (const DataLossError& error) {
    record_warmup(servable.path, "DATA_LOSS", records, micros_since(start));
    throw DataLossError(
        fmt::format("{}. Please verify your warmup data is in TFRecord format.", error.what()));
  } catch (const Error& error) {
    record_warmup(servable.path, status_code_name(error.code()), records, micros_since(start));
    throw;
  }
  record_warmup(servable.path, "OK", records, micros_since(start));
  log::info("Finished reading warmup data for model at {}. Number of warmup records read: {}.",
            path, records);
}

}  // namespace est::serving
