// The served models by name and the version look-up (see server_core.h). Followed: TF
// Serving's model_servers/server_core.cc (reload keeps a model's loaded versions, labels and
// UpdateModelVersionLabelMap's check), get_model_status_impl.cc and servable_handle lookups
// for the error messages.
#include "export/server_core.h"

#include <set>

#include <fmt/format.h>

#include "export/rest_json_text.h"

namespace est::serving {

void ServerCore::reconfigure(const std::vector<ModelOptions>& models) {
  std::set<std::string> names;
  for (const ModelOptions& options : models) {
    if (options.name.empty()) throw InvalidArgumentError("a model in the config has no name");
    if (options.base_path.empty())
      throw InvalidArgumentError(
          fmt::format("model '{}' in the config has no base_path", printable(options.name)));
    if (!names.insert(options.name).second)
      throw InvalidArgumentError(fmt::format(
          "Illegal to list model {} multiple times in config list", printable(options.name)));
  }
  std::lock_guard lock(mutex_);
  for (const ModelOptions& options : models) check_labels(options);
  std::map<std::string, std::shared_ptr<ModelManager>> next;
  for (const ModelOptions& options : models) {
    auto kept = models_.find(options.name);
    if (kept != models_.end() && kept->second->base_path() == options.base_path) {
      kept->second->reconfigure(options.policy, options.labels);
      next[options.name] = kept->second;
    } else {
      next[options.name] = std::make_shared<ModelManager>(options.name, options.base_path,
                                                          options.policy, options.labels, on_load_);
    }
  }
  models_ = std::move(next);
}

void ServerCore::set_load_hook(LoadHook on_load) {
  std::lock_guard lock(mutex_);
  on_load_ = std::move(on_load);
}

void ServerCore::check_labels(const ModelOptions& options) const {
  auto found = models_.find(options.name);
  const ModelManager* model = found == models_.end() ? nullptr : found->second.get();
  for (const auto& [label, version] : options.labels) {
    if (model && model->version(version)) continue;  // available
    if (options_.allow_version_labels_for_unavailable_models) {
      const std::optional<int64_t> existing = model ? model->label(label) : std::nullopt;
      if (!existing || *existing == version) continue;
    }
    throw FailedPreconditionError(
        fmt::format("Request to assign label to version {} of model {}, which is not currently "
                    "available for inference",
                    version, printable(options.name)));
  }
}

void ServerCore::poll() {
  std::vector<std::shared_ptr<ModelManager>> models;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, model] : models_) models.push_back(model);
  }
  for (const auto& model : models) model->poll();
}

std::shared_ptr<const ModelManager> ServerCore::model(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto found = models_.find(name);
  return found == models_.end() ? nullptr : found->second;
}

std::vector<std::string> ServerCore::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, model] : models_) names.push_back(name);
  return names;
}

std::shared_ptr<const Servable> find_servable(const ModelManager* model, const std::string& name,
                                              std::optional<int64_t> version,
                                              const std::optional<std::string>& label) {
  if (label) {
    std::optional<int64_t> labelled = model ? model->label(*label) : std::nullopt;
    if (!labelled)
      throw InvalidArgumentError("Unrecognized servable version label: " + printable(*label));
    version = labelled;
  }
  std::shared_ptr<const Servable> servable;
  if (model) servable = version ? model->version(*version) : model->current();
  if (!servable)
    throw NotFoundError(fmt::format("Servable not found for request: {}({}{})",
                                    version ? "Specific" : "Latest", printable(name),
                                    version ? fmt::format(", {}", *version) : ""));
  return servable;
}

std::vector<VersionStatus> version_statuses(const ModelManager* model, const std::string& name,
                                            std::optional<int64_t> version,
                                            const std::optional<std::string>& label) {
  if (model) {
    std::vector<VersionStatus> statuses = model->statuses();
    if (!version && !label && !statuses.empty()) return statuses;
    const std::optional<int64_t> asked = label ? model->label(*label) : version;
    for (const VersionStatus& status : statuses)
      if (asked && status.version == *asked) return {status};
  }
  // None: find_servable's NOT_FOUND (INVALID_ARGUMENT for an unknown label); a version served
  // since the look above is reported as served.
  return {{.version = find_servable(model, name, version, label)->version}};
}

std::shared_ptr<const Servable> ServerCore::find(const std::string& name,
                                                 std::optional<int64_t> version,
                                                 const std::optional<std::string>& label) const {
  return find_servable(model(name).get(), name, version, label);
}

}  // namespace est::serving
