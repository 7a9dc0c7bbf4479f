// TF Serving's flags that est-serve ignores (see tf_serving_flags.h).
#include "tools/tf_serving_flags.h"

#include <algorithm>
#include <cstdio>

namespace est::serve {

const std::vector<std::string>& tf_serving_flag_names() {
  static const std::vector<std::string> names = {"port",
                                                 "grpc_socket_path",
                                                 "rest_api_port",
                                                 "rest_api_num_threads",
                                                 "rest_api_timeout_in_ms",
                                                 "rest_api_enable_cors_support",
                                                 "enable_batching",
                                                 "batching_parameters_file",
                                                 "enable_per_model_batching_parameters",
                                                 "model_config_file",
                                                 "model_config_file_poll_wait_seconds",
                                                 "model_name",
                                                 "model_base_path",
                                                 "num_load_threads",
                                                 "num_unload_threads",
                                                 "max_num_load_retries",
                                                 "load_retry_interval_micros",
                                                 "file_system_poll_wait_seconds",
                                                 "flush_filesystem_caches",
                                                 "tensorflow_session_parallelism",
                                                 "tensorflow_session_config_file",
                                                 "tensorflow_intra_op_parallelism",
                                                 "tensorflow_inter_op_parallelism",
                                                 "use_alts_credentials",
                                                 "ssl_config_file",
                                                 "platform_config_file",
                                                 "per_process_gpu_memory_fraction",
                                                 "saved_model_tags",
                                                 "grpc_channel_arguments",
                                                 "grpc_max_threads",
                                                 "enable_model_warmup",
                                                 "num_request_iterations_for_warmup",
                                                 "version",
                                                 "monitoring_config_file",
                                                 "remove_unused_fields_from_bundle_metagraph",
                                                 "prefer_tflite_model",
                                                 "num_tflite_pools",
                                                 "num_tflite_interpreters_per_pool",
                                                 "enable_signature_method_name_check",
                                                 "xla_cpu_compilation_enabled",
                                                 "xla_gpu_compilation_enabled",
                                                 "enable_profiler",
                                                 "thread_pool_factory_config_file",
                                                 "mixed_precision",
                                                 "skip_initialize_tpu",
                                                 "enable_grpc_healthcheck_service",
                                                 "enable_serialization_as_tensor_content"};
  return names;
}

std::string filter_extras(const std::vector<std::string>& extras) {
  const auto& names = tf_serving_flag_names();
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& argument = extras[i];
    const size_t dashes = argument.rfind("--", 0) == 0 ? 2 : argument.rfind('-', 0) == 0 ? 1 : 0;
    if (dashes == 0) return argument;
    const size_t equals = argument.find('=');
    const std::string name =
        argument.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
    if (std::find(names.begin(), names.end(), name) == names.end()) return argument;
    std::fprintf(stderr,
                 "est-serve: warning: --%s is a tensorflow_model_server flag est-serve does not "
                 "act on; ignored\n",
                 name.c_str());
    // "--name value": the value is the next argument, unless that is a flag.
    if (equals == std::string::npos && i + 1 < extras.size() && extras[i + 1].rfind('-', 0) != 0)
      ++i;
  }
  return "";
}

}  // namespace est::serve
