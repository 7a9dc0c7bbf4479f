// ServerCore: the models a server serves, by name (TF Serving's ServerCore over a
// ModelServerConfig's model_config_list), shared by the REST and gRPC APIs. reconfigure()
// replaces the list: a model kept (same name and base path) keeps its loaded versions and takes
// its new version policy and labels, a new one is added, a model no longer listed is dropped
// (requests in flight finish on the versions they hold). find() resolves a request's model
// name and version or label to a loaded version, with TF Serving's errors
// (model_servers/get_model_status_impl.cc, server_core.cc): NOT_FOUND for an unknown model or a
// version not served, INVALID_ARGUMENT for an unknown label. As TF Serving's
// UpdateModelVersionLabelMap, a config's version_labels may name only versions loaded when it
// is applied (so a label is added once its version serves, by a later config), unless
// allow_version_labels_for_unavailable_models (then a new label may name any version, a label
// moved must still name a loaded one); a config that breaks this is refused whole
// (FAILED_PRECONDITION) and the models stay as they were.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "export/servable.h"

namespace est::serving {

// One model of the config: ModelConfig's name, base_path, model_version_policy, version_labels.
struct ModelOptions {
  std::string name;
  std::string base_path;
  VersionPolicy policy;
  std::map<std::string, int64_t> labels;
};

// TF Serving's ServerCore::Options that est-serve acts on (its flags of the same names).
struct ServerCoreOptions {
  bool allow_version_labels_for_unavailable_models = false;
};

class ServerCore {
 public:
  explicit ServerCore(ServerCoreOptions options = {}) : options_(options) {}

  // InvalidArgumentError for an empty or repeated name or an empty base path,
  // FailedPreconditionError for a label of a version not loaded (above), leaving the models as
  // they were.
  void reconfigure(const std::vector<ModelOptions>& models);
  // Run on every version of the models added from now on before it is served (servable.h).
  void set_load_hook(LoadHook on_load);
  // Polls every model's base path (ModelManager::poll).
  void poll();
  // The model named `name`, or null.
  std::shared_ptr<const ModelManager> model(const std::string& name) const;
  std::vector<std::string> names() const;
  // The version of `name` a request asks for: `version`, the version `label` names, or the
  // newest served. Errors as above; `name` is written printable in messages.
  std::shared_ptr<const Servable> find(const std::string& name, std::optional<int64_t> version,
                                       const std::optional<std::string>& label) const;

 private:
  // Throws the FailedPreconditionError above for the first label of `options` that may not be
  // assigned now. Called with mutex_ held.
  void check_labels(const ModelOptions& options) const;

  const ServerCoreOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ModelManager>> models_;
  LoadHook on_load_;
};

// find() on `model`, the model named `name` (null: no such model).
std::shared_ptr<const Servable> find_servable(const ModelManager* model, const std::string& name,
                                              std::optional<int64_t> version,
                                              const std::optional<std::string>& label);
// The states a model status request reports (TF Serving's GetModelStatusImpl): of `version`, or
// of the version `label` names, served or failed; without either, of every version served or
// failed (ModelManager::statuses). find_servable()'s errors when there is none.
std::vector<VersionStatus> version_statuses(const ModelManager* model, const std::string& name,
                                            std::optional<int64_t> version,
                                            const std::optional<std::string>& label);

}  // namespace est::serving
