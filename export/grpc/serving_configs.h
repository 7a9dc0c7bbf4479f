// est-serve's text-format config files other than the model config, read as
// tensorflow_model_server reads them (model_servers/server.cc, ParseProtoTextFile):
// --monitoring_config_file (MonitoringConfig: Prometheus's page on the REST port, its path
// defaulting to PrometheusExporter::kPrometheusPath) and --batching_parameters_file
// (BatchingParameters as the Batcher's options; a field left out takes the default of TF's
// SharedBatchScheduler / BatchingSession: max_batch_size 1000, batch_timeout_micros 0,
// max_enqueued_batches 10, num_batch_threads the machine's cores, thread_pool_name
// "batch_threads"; with enable_large_batch_splitting, max_execution_batch_size defaults to
// max_batch_size). A file that does not parse, or a value TF Serving refuses, is an
// InvalidArgumentError naming the file and the field.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "export/batcher.h"

namespace est::serving {

// `text` (of the file `path`) parsed into `message`; InvalidArgumentError naming the file, the
// line and column, and the message type otherwise.
void parse_text_proto(const std::string& text, const std::string& path,
                      google::protobuf::Message& message);
// The file at `path` parsed so (NotFoundError naming `flag` when it cannot be read).
void read_text_proto(const std::string& path, const std::string& flag,
                     google::protobuf::Message& message);

struct MonitoringOptions {
  bool prometheus = false;
  std::string path = "/monitoring/prometheus/metrics";
};
MonitoringOptions read_monitoring_config_file(const std::string& path);

Batcher::Options read_batching_parameters_file(const std::string& path);

}  // namespace est::serving
