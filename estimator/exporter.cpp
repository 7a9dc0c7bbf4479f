// LatestExporter: copy the checkpoint into a timestamped directory (written under a temporary
// name, then renamed), record the eval result beside it, and drop the oldest exports.
#include "estimator/exporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "checkpoint/file_util.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {

namespace fs = std::filesystem;

namespace {

// The timestamped export directories under `export_path`, oldest first.
std::vector<std::pair<int64_t, fs::path>> list_exports(const std::string& export_path) {
  std::vector<std::pair<int64_t, fs::path>> exports;
  for (const auto& entry : fs::directory_iterator(export_path)) {
    std::string stem = entry.path().filename().string();
    if (!entry.is_directory() || stem.empty() || stem.size() > 18 ||
        !std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    exports.emplace_back(std::stoll(stem), entry.path());
  }
  std::sort(exports.begin(), exports.end());
  return exports;
}

}  // namespace

LatestExporter::LatestExporter(std::string name, int exports_to_keep)
    : name_(std::move(name)), exports_to_keep_(exports_to_keep) {
  if (name_.empty() || name_.find('/') != std::string::npos)
    throw InvalidArgumentError(
        fmt::format("LatestExporter: name '{}' must be non-empty and contain no '/'", name_));
  if (exports_to_keep_ < 0)
    throw InvalidArgumentError(fmt::format(
        "LatestExporter: exports_to_keep must be >= 0 (0 keeps all), got {}", exports_to_keep_));
}

std::optional<std::string> LatestExporter::export_model(const Estimator& estimator,
                                                        const std::string& export_path,
                                                        const std::string& checkpoint_path,
                                                        const Metrics& eval_result,
                                                        bool /*is_the_final_export*/) {
  if (!fs::is_regular_file(checkpoint_path))
    throw NotFoundError(
        fmt::format("LatestExporter '{}': checkpoint {} does not exist", name_, checkpoint_path));
  fs::create_directories(export_path);
  // Seconds since the epoch, and always after every existing export (several exports within
  // one second, or a clock behind the newest), so the newest export sorts last.
  std::vector<std::pair<int64_t, fs::path>> exports = list_exports(export_path);
  auto timestamp = static_cast<int64_t>(estimator.config().now());
  if (!exports.empty()) timestamp = std::max(timestamp, exports.back().first + 1);
  fs::path final_dir = fs::path(export_path) / std::to_string(timestamp);
  fs::path staging = fs::path(export_path) / fmt::format("temp-{}", timestamp);
  fs::remove_all(staging);
  fs::create_directories(staging);
  fs::path file = fs::path(checkpoint_path).filename();
  fs::copy_file(checkpoint_path, staging / file);
  {
    std::ofstream state(staging / "checkpoint");
    state << "model_checkpoint_path: \"" << file.string() << "\"\n"
          << "all_model_checkpoint_paths: \"" << file.string() << "\"\n";
    std::ofstream result(staging / "eval_result.txt");
    for (const auto& [key, value] : eval_result) result << key << " = " << value << "\n";
  }
  fs::rename(staging, final_dir);
  log::info("Exported {} to {}", checkpoint_path, final_dir.string());

  if (exports_to_keep_ > 0) {
    exports = list_exports(export_path);
    for (size_t i = 0; i + static_cast<size_t>(exports_to_keep_) < exports.size(); ++i)
      fs::remove_all(exports[i].second);
  }
  return final_dir.string();
}

}  // namespace est
