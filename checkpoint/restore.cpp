// restore_into: load with fallback, check every target, then copy in place.
#include "checkpoint/restore.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <unordered_map>

#include "checkpoint/log.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_resume.h"
#include "checkpoint/verified_checkpoint.h"

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

// The newest checkpoint `open` accepts: `path_or_dir` itself, or the candidates of a directory
// newest first, skipping with a warning those that are unreadable or fail their checksums.
template <class Open>
auto open_with_fallback(const std::string& path_or_dir, std::string* loaded_path,
                        std::vector<std::string>* skipped, const Open& open) {
  std::error_code error;
  if (!std::filesystem::is_directory(path_or_dir, error)) {
    if (loaded_path) *loaded_path = path_or_dir;
    return open(path_or_dir);
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
      auto opened = open(candidate);
      if (loaded_path) *loaded_path = candidate;
      return opened;
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

// A checkpoint tensor as the checks before a restore see it.
struct SourceTensor {
  std::string_view name;
  const ops::Shape& shape;
  ops::DType dtype;
};

// Pairs every tensor of `into` with its checkpoint tensor (an index into `sources`) after the
// checks whose failure leaves the model untouched: InvalidArgumentError for a shape or dtype
// that does not match, NotFoundError for a missing tensor (unless allowed). Fills `result`'s
// path, global step, missing and unused.
std::vector<std::pair<TensorEntry*, size_t>> match_targets(const std::vector<SourceTensor>& sources,
                                                           const std::string& loaded_path,
                                                           int64_t global_step, TensorBundle& into,
                                                           const RestoreOptions& options,
                                                           RestoreResult& result) {
  result.path = loaded_path;
  result.global_step = global_step;
  std::unordered_map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < sources.size(); ++i) by_name[sources[i].name] = i;

  std::vector<std::string> mismatches;
  std::vector<std::pair<TensorEntry*, size_t>> pairs;
  for (TensorEntry& target : into.tensors) {
    auto found = by_name.find(target.name);
    if (found == by_name.end()) {
      result.missing.push_back(target.name);
      continue;
    }
    const SourceTensor& source = sources[found->second];
    if (!target.value.defined()) {
      mismatches.push_back(fmt::format("\"{}\" is undefined in the model", target.name));
    } else if (source.shape != target.value.shape() || source.dtype != target.value.dtype()) {
      mismatches.push_back(
          fmt::format("\"{}\" is {} {} in the checkpoint but {} {} in the model", target.name,
                      ops::dtype_name(source.dtype), ops::shape_str(source.shape),
                      ops::dtype_name(target.value.dtype()), ops::shape_str(target.value.shape())));
    }
    pairs.emplace_back(&target, found->second);
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
  for (const SourceTensor& source : sources)
    if (by_name.count(source.name)) result.unused.emplace_back(source.name);
  return pairs;
}

void take_blobs(std::vector<Blob> blobs, int64_t global_step, TensorBundle& into,
                RestoreResult& result) {
  result.blobs = blobs;
  into.blobs = std::move(blobs);
  into.global_step = global_step;
}

// A checkpoint opened for restore_into: est's verified in place, or TensorFlow's loaded whole.
struct Opened {
  std::unique_ptr<VerifiedCheckpoint> file;
  std::optional<TensorBundle> bundle;
};

Opened open_for_restore(const std::string& path) {
  Opened opened;
  if (is_tf_prefix(path))
    opened.bundle = load_tf_checkpoint(path);
  else
    opened.file = std::make_unique<VerifiedCheckpoint>(path);
  return opened;
}

}  // namespace

TensorBundle load_with_fallback(const std::string& path_or_dir, std::string* loaded_path,
                                std::vector<std::string>* skipped) {
  return open_with_fallback(path_or_dir, loaded_path, skipped,
                            [](const std::string& path) { return load_either(path); });
}

RestoreResult assign_into(const TensorBundle& loaded, const std::string& loaded_path,
                          TensorBundle& into, const RestoreOptions& options) {
  RestoreResult result;
  std::vector<SourceTensor> sources;
  for (const TensorEntry& entry : loaded.tensors)
    sources.push_back({entry.name, entry.value.shape(), entry.value.dtype()});
  for (auto [target, source] :
       match_targets(sources, loaded_path, loaded.global_step, into, options, result))
    target->value.copy_from(loaded.tensors[source].value);
  take_blobs(loaded.blobs, loaded.global_step, into, result);
  return result;
}

// An est file is verified first (every checksum, through one small buffer), then read straight
// into the targets: a damaged file fails before the model is touched, and no staging copy of
// the model's size is made (verified_checkpoint.h).
RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options) {
  std::string path;
  std::vector<std::string> skipped;
  Opened opened = open_with_fallback(path_or_dir, &path, &skipped, open_for_restore);
  RestoreResult result;
  if (opened.bundle) {
    result = assign_into(*opened.bundle, path, into, options);
  } else {
    const VerifiedCheckpoint& file = *opened.file;
    const CheckpointInfo& info = file.info();
    std::vector<SourceTensor> sources;
    for (const TensorInfo& tensor : info.tensors)
      sources.push_back({tensor.name, tensor.shape, tensor.dtype});
    auto pairs = match_targets(sources, path, info.global_step, into, options, result);
    file.check_unchanged();
    for (auto [target, source] : pairs) file.read_into(source, target->value);
    file.check_unchanged();
    take_blobs(file.blobs(), info.global_step, into, result);
  }
  result.skipped = std::move(skipped);
  return result;
}

}  // namespace est::checkpoint
