// --monitoring_config_file and --batching_parameters_file (see serving_configs.h). Followed:
// TF Serving's model_servers/server.cc, servables/tensorflow/bundle_factory_util.h
// (GetQueueOptions) and batching/batching_session.cc (allowed_batch_sizes), TF's
// shared_batch_scheduler.h (defaults and checks).
#include "export/grpc/serving_configs.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "ops/error.h"
#include "tensorflow_serving/config/monitoring_config.pb.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb.h"

namespace est::serving {
namespace {

// The parser's first error, kept for the message.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (errors.empty())
      errors = fmt::format("line {}, column {}: {}", line + 1, column + 1, message);
  }
  std::string errors;
};

// InvalidArgumentError naming the file and the field unless `ok`.
void check(bool ok, const std::string& path, const char* field, const std::string& what) {
  if (!ok)
    throw InvalidArgumentError(fmt::format("{}: BatchingParameters.{} {}", path, field, what));
}

}  // namespace

void parse_text_proto(const std::string& text, const std::string& path,
                      google::protobuf::Message& message) {
  google::protobuf::TextFormat::Parser parser;
  Collector collector;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text, &message))
    throw InvalidArgumentError(fmt::format("{} is not a {} in protobuf's text format: {}", path,
                                           message.GetDescriptor()->name(), collector.errors));
}

void read_text_proto(const std::string& path, const std::string& flag,
                     google::protobuf::Message& message) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NotFoundError(fmt::format("cannot read {} {}", flag, path));
  std::stringstream text;
  text << file.rdbuf();
  parse_text_proto(text.str(), path, message);
}

MonitoringOptions read_monitoring_config_file(const std::string& path) {
  tensorflow::serving::MonitoringConfig config;
  read_text_proto(path, "--monitoring_config_file", config);
  MonitoringOptions options;
  options.prometheus = config.prometheus_config().enable();
  if (!config.prometheus_config().path().empty()) options.path = config.prometheus_config().path();
  if (options.path[0] != '/')
    throw InvalidArgumentError(
        fmt::format("{}: prometheus_config.path \"{}\" must begin with '/'", path, options.path));
  return options;
}

Batcher::Options read_batching_parameters_file(const std::string& path) {
  tensorflow::serving::BatchingParameters parameters;
  read_text_proto(path, "--batching_parameters_file", parameters);
  Batcher::Options options{.max_batch_size = 1000,
                           .batch_timeout = std::chrono::microseconds(0),
                           .max_enqueued_batches = 10,
                           .num_batch_threads = std::max<int64_t>(
                               1, static_cast<int64_t>(std::thread::hardware_concurrency())),
                           .thread_pool_name = "batch_threads"};
  if (parameters.has_max_batch_size()) options.max_batch_size = parameters.max_batch_size().value();
  check(options.max_batch_size > 0, path, "max_batch_size",
        fmt::format("must be positive; was {}", options.max_batch_size));
  if (parameters.has_batch_timeout_micros()) {
    const int64_t micros = parameters.batch_timeout_micros().value();
    check(micros >= 0, path, "batch_timeout_micros",
          fmt::format("must be non-negative; was {}", micros));
    options.batch_timeout = std::chrono::microseconds(micros);
  }
  if (parameters.has_max_enqueued_batches())
    options.max_enqueued_batches = parameters.max_enqueued_batches().value();
  check(options.max_enqueued_batches > 0, path, "max_enqueued_batches",
        fmt::format("must be positive; was {}", options.max_enqueued_batches));
  if (parameters.has_num_batch_threads())
    options.num_batch_threads = parameters.num_batch_threads().value();
  check(options.num_batch_threads > 0, path, "num_batch_threads",
        fmt::format("must be positive; was {}", options.num_batch_threads));
  if (parameters.has_thread_pool_name())
    options.thread_pool_name = parameters.thread_pool_name().value();
  // TF Serving's GetQueueOptions (servables/tensorflow/bundle_factory_util.h): with splitting,
  // max_execution_batch_size defaults to max_batch_size; it may not exceed it (AddQueue).
  options.enable_large_batch_splitting = parameters.has_enable_large_batch_splitting() &&
                                         parameters.enable_large_batch_splitting().value();
  if (options.enable_large_batch_splitting && parameters.has_max_execution_batch_size()) {
    options.max_execution_batch_size = parameters.max_execution_batch_size().value();
    check(options.max_execution_batch_size > 0, path, "max_execution_batch_size",
          fmt::format("must be positive; was {}", options.max_execution_batch_size));
    check(options.max_execution_batch_size <= options.max_batch_size, path,
          "max_execution_batch_size",
          fmt::format("must be at most max_batch_size when enable_large_batch_splitting is true "
                      "(TF's input_batch_size_limit); was {}, max_batch_size {}",
                      options.max_execution_batch_size, options.max_batch_size));
  }
  options.allowed_batch_sizes.assign(parameters.allowed_batch_sizes().begin(),
                                     parameters.allowed_batch_sizes().end());
  for (size_t i = 1; i < options.allowed_batch_sizes.size(); ++i)
    check(options.allowed_batch_sizes[i] > options.allowed_batch_sizes[i - 1], path,
          "allowed_batch_sizes", "entries must be monotonically increasing");
  if (!options.allowed_batch_sizes.empty())
    check(options.allowed_batch_sizes.back() == options.max_batch_size, path, "allowed_batch_sizes",
          fmt::format("last entry must match max_batch_size; last entry was {}; expected {}",
                      options.allowed_batch_sizes.back(), options.max_batch_size));
  options.pad_variable_length_inputs = parameters.pad_variable_length_inputs();
  return options;
}

}  // namespace est::serving
