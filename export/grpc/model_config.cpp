// --model_config_file and ModelServerConfig (see model_config.h).
#include "export/grpc/model_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "export/grpc/serving_configs.h"
#include "export/rest_json_text.h"

namespace est::serving {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;

std::vector<ModelOptions> models_of(const tfs::ModelServerConfig& config) {
  if (config.config_case() == tfs::ModelServerConfig::kCustomModelConfig)
    throw InvalidArgumentError(
        "ModelServerConfig.custom_model_config is not supported; list the models in "
        "model_config_list");
  std::vector<ModelOptions> models;
  for (const tfs::ModelConfig& model : config.model_config_list().config()) {
    if (!model.model_platform().empty() && model.model_platform() != "tensorflow")
      throw InvalidArgumentError(fmt::format(
          "model '{}' asks for model_platform '{}'; est-serve serves \"tensorflow\" models (est's "
          "exports)",
          printable(model.name()), printable(model.model_platform())));
    ModelOptions options{.name = model.name(), .base_path = model.base_path()};
    const auto& policy = model.model_version_policy();
    using Policy = tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy;
    switch (policy.policy_choice_case()) {
      case Policy::kAll:
        options.policy.kind = VersionPolicy::Kind::kAll;
        break;
      case Policy::kSpecific:
        options.policy.kind = VersionPolicy::Kind::kSpecific;
        options.policy.versions.assign(policy.specific().versions().begin(),
                                       policy.specific().versions().end());
        if (options.policy.versions.empty())
          throw InvalidArgumentError(
              fmt::format("model '{}': model_version_policy specific lists no versions",
                          printable(model.name())));
        break;
      case Policy::kLatest:
        options.policy.num_versions = std::max<int64_t>(policy.latest().num_versions(), 1);
        break;
      default:
        break;
    }
    for (const auto& [label, version] : model.version_labels()) {
      if (label.empty() || label.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQR"
                                                   "STUVWXYZ0123456789_-.") != std::string::npos)
        throw InvalidArgumentError(fmt::format("model '{}': version label '{}' is not a name",
                                               printable(model.name()), printable(label)));
      options.labels[label] = version;
    }
    models.push_back(std::move(options));
  }
  return models;
}

tfs::ModelServerConfig parse_model_config(const std::string& text, const std::string& path) {
  tfs::ModelServerConfig config;
  parse_text_proto(text, path, config);
  return config;
}

std::vector<ModelOptions> read_model_config_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NotFoundError("cannot read --model_config_file " + path);
  std::stringstream text;
  text << file.rdbuf();
  std::vector<ModelOptions> models = models_of(parse_model_config(text.str(), path));
  for (ModelOptions& model : models)
    if (!model.base_path.empty() && fs::path(model.base_path).is_relative())
      model.base_path = (fs::path(path).parent_path() / model.base_path).string();
  return models;
}

}  // namespace est::serving
