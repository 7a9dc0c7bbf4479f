// LatestExporter, BestExporter and FinalExporter over Estimator::export_saved_model. Followed:
// tensorflow/estimator's python/estimator/exporter.py (including the first-export rule of its
// BestExporter: an evaluation already in the event files when the best is read back is exported
// once) and gc.py (only ten-digit directories count as exports).
#include "estimator/exporter.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "estimator/event_reader.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {

namespace fs = std::filesystem;

namespace {

void check_name(const std::string& exporter, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos)
    throw InvalidArgumentError(
        fmt::format("{}: name '{}' must be non-empty and contain no '/'", exporter, name));
}

void check_exports_to_keep(const std::string& exporter, std::optional<int> exports_to_keep) {
  if (exports_to_keep && *exports_to_keep <= 0)
    throw InvalidArgumentError(fmt::format(
        "{}: exports_to_keep, if given, must be a positive number (unset keeps all), got {}",
        exporter, *exports_to_keep));
}

SavedModelExport checked_export(const std::string& exporter, std::string name,
                                ServingInputReceiverFn fn,
                                std::map<std::string, std::string> assets_extra) {
  check_name(exporter, name);
  if (!fn)
    throw InvalidArgumentError(
        fmt::format("{} '{}': serving_input_receiver_fn is empty", exporter, name));
  return {std::move(name), std::move(fn), std::move(assets_extra)};
}

// Deletes all but the newest `keep` exports (directories named by ten digits) of `base`.
void garbage_collect_exports(const std::string& base, std::optional<int> keep) {
  if (!keep || !fs::is_directory(base)) return;
  std::vector<std::pair<int64_t, fs::path>> exports;
  for (const auto& entry : fs::directory_iterator(base)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.size() == 10 &&
        std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      exports.emplace_back(std::stoll(name), entry.path());
  }
  std::sort(exports.begin(), exports.end());
  for (size_t i = 0; i + static_cast<size_t>(*keep) < exports.size(); ++i) {
    std::error_code error;
    fs::remove_all(exports[i].second, error);
    if (error)
      log::warning("Can not delete {} recursively: {}", exports[i].second.string(),
                   error.message());
  }
}

// TF's first-export rule compares the best read back with this evaluation; event files hold
// float32 values, so the comparison is at float32.
bool same_as_in_events(const Metrics& from_events, const Metrics& eval_result) {
  for (const auto& [tag, value] : from_events) {
    auto found = eval_result.find(tag);
    if (found == eval_result.end() ||
        static_cast<float>(found->second) != static_cast<float>(value))
      return false;
  }
  return !from_events.empty();
}

}  // namespace

std::string SavedModelExport::run(const Estimator& estimator, const std::string& export_path,
                                  const std::string& checkpoint_path) const {
  return estimator.export_saved_model(export_path, serving_input_receiver_fn, assets_extra,
                                      /*as_text=*/false, checkpoint_path);
}

LatestExporter::LatestExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
                               std::map<std::string, std::string> assets_extra,
                               std::optional<int> exports_to_keep)
    : export_(checked_export("LatestExporter", std::move(name),
                             std::move(serving_input_receiver_fn), std::move(assets_extra))),
      exports_to_keep_(exports_to_keep) {
  check_exports_to_keep("LatestExporter", exports_to_keep_);
}

std::optional<std::string> LatestExporter::export_model(const Estimator& estimator,
                                                        const std::string& export_path,
                                                        const std::string& checkpoint_path,
                                                        const Metrics&, bool) {
  std::string written = export_.run(estimator, export_path, checkpoint_path);
  garbage_collect_exports(export_path, exports_to_keep_);
  return written;
}

bool loss_smaller(const Metrics& best_eval_result, const Metrics& current_eval_result) {
  auto best = best_eval_result.find("loss");
  if (best == best_eval_result.end())
    throw InvalidArgumentError(
        "loss_smaller: best_eval_result cannot be empty or no loss is "
        "found in it");
  auto current = current_eval_result.find("loss");
  if (current == current_eval_result.end())
    throw InvalidArgumentError(
        "loss_smaller: current_eval_result cannot be empty or no loss is "
        "found in it");
  return best->second > current->second;
}

BestExporter::BestExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
                           std::string event_file_pattern, CompareFn compare_fn,
                           std::map<std::string, std::string> assets_extra,
                           std::optional<int> exports_to_keep)
    : export_(checked_export("BestExporter", std::move(name), std::move(serving_input_receiver_fn),
                             std::move(assets_extra))),
      event_file_pattern_(std::move(event_file_pattern)),
      compare_fn_(std::move(compare_fn)),
      exports_to_keep_(exports_to_keep) {
  if (!compare_fn_) throw InvalidArgumentError("BestExporter: compare_fn must not be empty");
  check_exports_to_keep("BestExporter", exports_to_keep_);
}

std::optional<Metrics> BestExporter::best_in_event_files(const std::string& model_dir) const {
  const fs::path pattern = fs::path(model_dir) / event_file_pattern_;
  const fs::path dir = pattern.parent_path();
  const std::string file_glob = pattern.filename().string();
  if (!fs::is_directory(dir)) return std::nullopt;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() &&
        fnmatch(file_glob.c_str(), entry.path().filename().c_str(), 0) == 0)
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  std::optional<Metrics> best;
  for (const std::string& file : files) {
    // One evaluation's scalars share a step: group them, in file order.
    std::vector<std::pair<int64_t, Metrics>> results;
    for (const ScalarEvent& event : read_events(file)) {
      if (results.empty() || results.back().first != event.step)
        results.push_back({event.step, {}});
      results.back().second[event.tag] = event.value;
    }
    for (const auto& [step, result] : results)
      if (!best || compare_fn_(*best, result)) best = result;
  }
  return best;
}

std::optional<std::string> BestExporter::export_model(const Estimator& estimator,
                                                      const std::string& export_path,
                                                      const std::string& checkpoint_path,
                                                      const Metrics& eval_result, bool) {
  if (model_dir_ != estimator.model_dir() && !event_file_pattern_.empty()) {
    log::info("Loading best metric from event files.");
    model_dir_ = estimator.model_dir();
    best_eval_result_ = best_in_event_files(*model_dir_);
  }
  if (best_eval_result_ &&
      !(!has_exported_ && same_as_in_events(*best_eval_result_, eval_result)) &&
      !compare_fn_(*best_eval_result_, eval_result))
    return std::nullopt;
  log::info("Performing best model export.");
  best_eval_result_ = eval_result;
  std::string written = export_.run(estimator, export_path, checkpoint_path);
  garbage_collect_exports(export_path, exports_to_keep_);
  has_exported_ = true;
  return written;
}

FinalExporter::FinalExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
                             std::map<std::string, std::string> assets_extra)
    : export_(checked_export("FinalExporter", std::move(name), std::move(serving_input_receiver_fn),
                             std::move(assets_extra))) {}

std::optional<std::string> FinalExporter::export_model(const Estimator& estimator,
                                                       const std::string& export_path,
                                                       const std::string& checkpoint_path,
                                                       const Metrics&, bool is_the_final_export) {
  if (!is_the_final_export) return std::nullopt;
  log::info("Performing the final export in the end of training.");
  return export_.run(estimator, export_path, checkpoint_path);
}

}  // namespace est
