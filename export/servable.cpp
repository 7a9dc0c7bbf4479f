// Signatures, version discovery and the ModelManager's reload (see servable.h).
#include "export/servable.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "export/serving_metrics.h"
#include "ops/logging.h"

namespace est::serving {

namespace fs = std::filesystem;

namespace {

const std::pair<DType, const char*> kTfDtypes[] = {
    {DType::kF32, "DT_FLOAT"},     {DType::kF64, "DT_DOUBLE"},   {DType::kI32, "DT_INT32"},
    {DType::kI64, "DT_INT64"},     {DType::kU8, "DT_UINT8"},     {DType::kBool, "DT_BOOL"},
    {DType::kBF16, "DT_BFLOAT16"}, {DType::kString, "DT_STRING"}};

std::map<std::string, TensorInfo> infos_of(const nlohmann::json& json) {
  std::map<std::string, TensorInfo> infos;
  for (const auto& [key, value] : json.items())
    infos[key] = {.name = value.at("name").get<std::string>(),
                  .dtype = dtype_from_tf_name(value.at("dtype").get<std::string>()),
                  .shape = value.at("tensor_shape").get<Shape>()};
  return infos;
}

}  // namespace

std::string tf_dtype_name(DType dtype) {
  for (const auto& [d, name] : kTfDtypes)
    if (d == dtype) return name;
  return "DT_INVALID";
}

DType dtype_from_tf_name(const std::string& name) {
  for (const auto& [d, tf_name] : kTfDtypes)
    if (name == tf_name) return d;
  throw InvalidArgumentError("unknown TensorFlow dtype '" + name + "'");
}

Signatures load_signatures(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw NotFoundError("cannot open " + path);
  try {
    nlohmann::json json = nlohmann::json::parse(file);
    Signatures signatures;
    for (const auto& [name, value] : json.items()) {
      signatures[name] = {.method_name = value.at("method_name").get<std::string>(),
                          .inputs = infos_of(value.at("inputs")),
                          .outputs = infos_of(value.at("outputs"))};
      if (value.contains("parse_example"))
        signatures[name].parse_example = parse_example_step_from_json(value["parse_example"]);
      if (value.contains("lookups"))
        for (const auto& step : value["lookups"])
          signatures[name].lookups.push_back(
              lookup_step_from_json(step, fs::path(path).parent_path().string()));
    }
    return signatures;
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("{} is not a signatures file: {}", path, error.what()));
  } catch (const InvalidArgumentError& error) {
    throw DataLossError(fmt::format("{}: {}", path, error.what()));
  } catch (const DataLossError& error) {
    throw DataLossError(fmt::format("{}: {}", path, error.what()));
  }
}

std::map<int64_t, std::string> versions_on_disk(const std::string& base_path) {
  std::map<int64_t, std::string> versions;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(base_path, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 ||
        name.find_first_not_of("0123456789") != std::string::npos ||
        !fs::is_regular_file(entry.path() / "model.onnx"))
      continue;
    versions[std::stoll(name)] = entry.path().string();
  }
  return versions;
}

std::optional<std::pair<int64_t, std::string>> newest_version(const std::string& base_path) {
  auto versions = versions_on_disk(base_path);
  if (versions.empty()) return std::nullopt;
  return *versions.rbegin();
}

ModelManager::ModelManager(std::string name, std::string base_path, VersionPolicy policy,
                           std::map<std::string, int64_t> labels, LoadHook on_load)
    : name_(std::move(name)),
      base_path_(std::move(base_path)),
      policy_(std::move(policy)),
      labels_(std::move(labels)),
      on_load_(std::move(on_load)) {}

namespace {

// The versions on disk `policy` names (TF Serving's file_system_storage_path_source.cc:
// latest N: the N largest; all; specific: those listed that are on disk).
std::map<int64_t, std::string> aspired(const VersionPolicy& policy,
                                       const std::map<int64_t, std::string>& on_disk) {
  if (policy.kind == VersionPolicy::Kind::kAll) return on_disk;
  std::map<int64_t, std::string> chosen;
  if (policy.kind == VersionPolicy::Kind::kSpecific) {
    for (int64_t version : policy.versions)
      if (auto found = on_disk.find(version); found != on_disk.end()) chosen.insert(*found);
    return chosen;
  }
  int64_t left = std::max<int64_t>(policy.num_versions, 1);
  for (auto it = on_disk.rbegin(); it != on_disk.rend() && left > 0; ++it, --left)
    chosen.insert(*it);
  return chosen;
}

}  // namespace

// TF Serving's file-system source (sources/storage_path/file_system_storage_path_source.cc)
// aspires the versions on disk the policy names at each poll, older or newer than those served,
// and none when the base path holds no version (then the served ones are unloaded); a base path
// that is missing emits nothing, and the served versions stay.
//
// The versions then change as TF Serving's default AspiredVersionPolicy decides, one action at a
// time (core/availability_preserving_policy.cc, run by core/aspired_versions_manager.cc): the
// lowest served version no longer aspired is unloaded when nothing is aspired, when an aspired
// version is served, or when more than one unaspired version is served; otherwise the highest
// aspired version not yet served is loaded. So a new version is loaded (and warmed up) while the
// old one serves, the old one goes only once the new one is available, and when the new one
// fails to load the last old one keeps serving.
bool ModelManager::poll() {
  std::lock_guard polling(poll_mutex_);
  std::error_code error;
  if (!fs::is_directory(base_path_, error)) return false;
  VersionPolicy policy;
  {
    std::lock_guard lock(mutex_);
    policy = policy_;
  }
  const std::map<int64_t, std::string> on_disk = versions_on_disk(base_path_);
  const std::map<int64_t, std::string> wanted = aspired(policy, on_disk);
  std::set<int64_t> tried;  // loads attempted by this poll (a failed one is retried at the next)
  bool changed = false;
  for (;;) {
    std::vector<int64_t> unaspired;  // oldest first
    bool aspired_served = false;
    for (const auto& servable : served()) {
      if (wanted.count(servable->version))
        aspired_served = true;
      else
        unaspired.push_back(servable->version);
    }
    if (!unaspired.empty() && (wanted.empty() || aspired_served || unaspired.size() > 1)) {
      unload(unaspired.front(), on_disk.empty());
      changed = true;
      continue;
    }
    auto next = std::find_if(wanted.rbegin(), wanted.rend(), [&](const auto& entry) {
      return !tried.count(entry.first) && !version(entry.first);
    });
    if (next == wanted.rend()) return changed;
    tried.insert(next->first);
    changed |= load(next->first, next->second);
  }
}

void ModelManager::unload(int64_t number, bool none_on_disk) {
  if (none_on_disk)
    log::warning("No versions of servable {} found under base path {}: unloading version {}", name_,
                 base_path_, number);
  else
    log::info("Unloading servable version {{name: {} version: {}}}", name_, number);
  std::lock_guard lock(mutex_);
  served_.erase(number);
}

bool ModelManager::load(int64_t number, const std::string& path) {
  std::shared_ptr<const Servable> servable;
  const int64_t start = now_micros();
  try {
    servable = std::make_shared<const Servable>(
        Servable{number, path, OnnxModel::load((fs::path(path) / "model.onnx").string()),
                 load_signatures((fs::path(path) / "signatures.json").string()), name_});
    record_load(path, true, micros_since(start));  // TF counts the load, not the warmup
    if (on_load_) on_load_(*servable);
  } catch (const Error& error) {
    if (!servable) record_load(path, false, micros_since(start));
    std::lock_guard lock(mutex_);
    if (!failed_.count(number))
      log::error("Loading servable {} version {} failed (retrying at the next poll): {}", name_,
                 number, error.what());
    failed_[number] = {.version = number, .error = error.code(), .error_message = error.what()};
    return false;
  }
  std::lock_guard lock(mutex_);
  served_[number] = std::move(servable);
  failed_.erase(number);
  log::info("Successfully loaded servable version {{name: {} version: {}}}", name_, number);
  return true;
}

std::shared_ptr<const Servable> ModelManager::current() const {
  std::lock_guard lock(mutex_);
  return served_.empty() ? nullptr : served_.rbegin()->second;
}

std::shared_ptr<const Servable> ModelManager::version(int64_t version) const {
  std::lock_guard lock(mutex_);
  auto found = served_.find(version);
  return found == served_.end() ? nullptr : found->second;
}

std::vector<std::shared_ptr<const Servable>> ModelManager::served() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const Servable>> all;
  for (const auto& [number, servable] : served_) all.push_back(servable);
  return all;
}

std::vector<VersionStatus> ModelManager::statuses() const {
  std::lock_guard lock(mutex_);
  std::map<int64_t, VersionStatus> all = failed_;
  for (const auto& [number, servable] : served_) all[number] = {.version = number};
  std::vector<VersionStatus> newest_first;
  for (auto it = all.rbegin(); it != all.rend(); ++it) newest_first.push_back(it->second);
  return newest_first;
}

std::optional<int64_t> ModelManager::label(const std::string& label) const {
  std::lock_guard lock(mutex_);
  auto found = labels_.find(label);
  if (found == labels_.end()) return std::nullopt;
  return found->second;
}

void ModelManager::reconfigure(VersionPolicy policy, std::map<std::string, int64_t> labels) {
  std::lock_guard lock(mutex_);
  policy_ = std::move(policy);
  labels_ = std::move(labels);
}

}  // namespace est::serving
