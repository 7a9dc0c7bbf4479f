// restore_into: load with fallback, check every target, then copy in place.
#include "checkpoint/restore.h"

#include <fmt/format.h>

#include <filesystem>
#include <unordered_map>

#include "checkpoint/log.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_resume.h"

namespace est::checkpoint {
namespace {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string quoted_list(const std::vector<std::string>& names, size_t limit = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i)
    out += fmt::format("{}\"{}\"", i ? ", " : "", names[i]);
  if (names.size() > limit) out += fmt::format(" and {} more", names.size() - limit);
  return out;
}

// est's checkpoint file, or TensorFlow's checkpoint prefix (tf_resume.h).
TensorBundle load_either(const std::string& path) {
  return is_tf_prefix(path) ? load_tf_checkpoint(path) : load(path);
}

}  // namespace

TensorBundle load_with_fallback(const std::string& path_or_dir, std::string* loaded_path,
                                std::vector<std::string>* skipped) {
  std::error_code error;
  if (!std::filesystem::is_directory(path_or_dir, error)) {
    if (loaded_path) *loaded_path = path_or_dir;
    return load_either(path_or_dir);
  }
  std::vector<std::string> candidates = checkpoint_candidates(path_or_dir);
  if (candidates.empty())
    throw NotFoundError(fmt::format(
        "No checkpoint to restore in {}: it has no \"checkpoint\" state file; train first or "
        "pass a checkpoint file",
        path_or_dir));
  std::vector<std::string> failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& candidate = candidates[i];
    try {
      TensorBundle bundle = load_either(candidate);
      if (loaded_path) *loaded_path = candidate;
      return bundle;
    } catch (const DataLossError& failure) {
      failures.push_back(fmt::format("{}: {}", file_name(candidate), failure.what()));
    } catch (const NotFoundError& failure) {
      failures.push_back(fmt::format("{}: {}", file_name(candidate), failure.what()));
    }
    if (skipped) skipped->push_back(candidate);
    std::string next = i + 1 < candidates.size()
                           ? fmt::format("falling back to {}", file_name(candidates[i + 1]))
                           : std::string("no earlier checkpoint is left");
    log_warning(fmt::format("Checkpoint {} is unreadable ({}); {}", file_name(candidate),
                            failures.back(), next));
  }
  throw DataLossError(fmt::format(
      "No readable checkpoint in {}: all {} listed in its state file failed ({}). The files "
      "were left in place; inspect them with est-ckpt --verify {}",
      path_or_dir, candidates.size(), fmt::join(failures, "; "), path_or_dir));
}

RestoreResult assign_into(const TensorBundle& loaded, const std::string& loaded_path,
                          TensorBundle& into, const RestoreOptions& options) {
  RestoreResult result;
  result.path = loaded_path;
  result.global_step = loaded.global_step;
  std::unordered_map<std::string_view, const TensorEntry*> by_name;
  for (const TensorEntry& entry : loaded.tensors) by_name[entry.name] = &entry;

  std::vector<std::string> mismatches;
  std::vector<std::pair<TensorEntry*, const TensorEntry*>> copies;
  for (TensorEntry& target : into.tensors) {
    auto found = by_name.find(target.name);
    if (found == by_name.end()) {
      result.missing.push_back(target.name);
      continue;
    }
    const Tensor& source = found->second->value;
    if (!target.value.defined()) {
      mismatches.push_back(fmt::format("\"{}\" is undefined in the model", target.name));
    } else if (source.shape() != target.value.shape() || source.dtype() != target.value.dtype()) {
      mismatches.push_back(
          fmt::format("\"{}\" is {} {} in the checkpoint but {} {} in the model", target.name,
                      ops::dtype_name(source.dtype()), ops::shape_str(source.shape()),
                      ops::dtype_name(target.value.dtype()), ops::shape_str(target.value.shape())));
    }
    copies.emplace_back(&target, found->second);
    by_name.erase(found);
  }
  if (!mismatches.empty())
    throw InvalidArgumentError(fmt::format(
        "Restoring {}: {} variable(s) do not match the model: {}. Nothing was restored; change "
        "the model back, or warm-start only the matching variables",
        loaded_path, mismatches.size(), fmt::join(mismatches, "; ")));
  if (!result.missing.empty() && !options.allow_missing)
    throw NotFoundError(fmt::format(
        "Restoring {}: the checkpoint has no {} (of {} in the model). Nothing was restored; set "
        "RestoreOptions::allow_missing to keep their initial values, or warm-start with a name "
        "map",
        loaded_path, quoted_list(result.missing), into.tensors.size()));
  for (const TensorEntry& entry : loaded.tensors)
    if (by_name.count(entry.name)) result.unused.push_back(entry.name);

  for (auto& [target, source] : copies) target->value.copy_from(source->value);
  result.blobs = loaded.blobs;
  into.blobs = loaded.blobs;
  into.global_step = loaded.global_step;
  return result;
}

RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options) {
  std::string path;
  std::vector<std::string> skipped;
  TensorBundle loaded = load_with_fallback(path_or_dir, &path, &skipped);
  RestoreResult result = assign_into(loaded, path, into, options);
  result.skipped = std::move(skipped);
  return result;
}

}  // namespace est::checkpoint
