// TF Serving's ModelServerConfig (tensorflow_serving/config/model_server_config.proto) as the
// ServerCore's model list: --model_config_file in protobuf's text format, or the config of a
// HandleReloadConfigRequest. Followed: TF Serving's model_servers/server.cc (a relative
// base_path is relative to the config file's directory) and server_core.cc (only
// model_config_list is served; a model's version policy defaults to the newest version).
#pragma once

#include <string>
#include <vector>

#include "export/server_core.h"
#include "tensorflow_serving/config/model_server_config.pb.h"

namespace est::serving {

// The models of `config`; InvalidArgumentError for a custom_model_config, a platform other
// than "tensorflow", or a version label that is not a name.
std::vector<ModelOptions> models_of(const tensorflow::serving::ModelServerConfig& config);

// The text of --model_config_file parsed; InvalidArgumentError naming the file, line and
// column when it does not parse.
tensorflow::serving::ModelServerConfig parse_model_config(const std::string& text,
                                                          const std::string& path);

// The models of the file at `path` (NotFoundError when unreadable), relative base paths
// resolved against its directory.
std::vector<ModelOptions> read_model_config_file(const std::string& path);

}  // namespace est::serving
