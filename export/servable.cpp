// Signatures, version discovery and the ModelManager's reload (see servable.h).
#include "export/servable.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

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

std::optional<std::pair<int64_t, std::string>> newest_version(const std::string& base_path) {
  std::optional<std::pair<int64_t, std::string>> newest;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(base_path, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 ||
        name.find_first_not_of("0123456789") != std::string::npos ||
        !fs::is_regular_file(entry.path() / "model.onnx"))
      continue;
    const int64_t version = std::stoll(name);
    if (!newest || version > newest->first) newest = {{version, entry.path().string()}};
  }
  return newest;
}

ModelManager::ModelManager(std::string name, std::string base_path)
    : name_(std::move(name)), base_path_(std::move(base_path)) {}

// TF Serving's file-system source (sources/storage_path/file_system_storage_path_source.cc)
// aspires the newest version on disk at each poll, older or newer than the one served, and
// none when the base path holds no version (then the served one is unloaded); a base path that
// is missing emits nothing, and the served version stays.
bool ModelManager::poll() {
  std::error_code error;
  if (!fs::is_directory(base_path_, error)) return false;
  auto newest = newest_version(base_path_);
  std::shared_ptr<const Servable> served = current();
  if (!newest) {
    if (!served) return false;
    log::warning("No versions of servable {} found under base path {}: unloading version {}", name_,
                 base_path_, served->version);
    std::lock_guard lock(mutex_);
    current_ = nullptr;
    return true;
  }
  if (served && served->version == newest->first) return false;
  std::shared_ptr<const Servable> servable;
  try {
    servable = std::make_shared<const Servable>(
        Servable{newest->first, newest->second,
                 OnnxModel::load((fs::path(newest->second) / "model.onnx").string()),
                 load_signatures((fs::path(newest->second) / "signatures.json").string())});
  } catch (const Error& error) {
    if (failed_version_ != newest->first)
      log::error("Loading servable {} version {} failed (retrying at the next poll): {}", name_,
                 newest->first, error.what());
    failed_version_ = newest->first;
    return false;
  }
  std::lock_guard lock(mutex_);
  current_ = std::move(servable);
  log::info("Successfully loaded servable version {{name: {} version: {}}}", name_,
            current_->version);
  return true;
}

std::shared_ptr<const Servable> ModelManager::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

}  // namespace est::serving
