// restore_into: with fallback, check every target, then read each tensor in place.
#include "checkpoint/restore.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
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

// A mismatch between the model and a checkpoint (shape, dtype, a missing tensor) found while
// trying one checkpoint of a directory: the model's doing, not the file's damage, so it ends the
// restore instead of falling back to an earlier checkpoint.
struct ModelMismatch {
  std::exception_ptr error;
};

std::vector<std::pair<TensorEntry*, size_t>> match_or_refuse(
    const std::vector<SourceTensor>& sources, const std::string& path, int64_t global_step,
    TensorBundle& into, const RestoreOptions& options, RestoreResult& result) {
  try {
    return match_targets(sources, path, global_step, into, options, result);
  } catch (const Error&) {
    throw ModelMismatch{std::current_exception()};
  }
}

// Restores one checkpoint file (est's, or TensorFlow's prefix loaded whole). An est file is read
// straight into the targets in file order, each tensor's CRC-32 checked as it is read; with
// options.verify_first every checksum is checked before anything is written. When a tensor
// fails its checksum, the targets written so far are added to `overwritten` before the
// DataLossError goes on.
RestoreResult restore_file(const std::string& path, TensorBundle& into,
                           const RestoreOptions& options,
                           std::vector<const TensorEntry*>& overwritten,
                           std::vector<Tensor>* unused_values) {
  RestoreResult result;
  std::vector<SourceTensor> sources;
  if (unused_values) unused_values->clear();
  if (is_tf_prefix(path)) {
    const TensorBundle loaded = load_tf_checkpoint(path);
    for (const TensorEntry& entry : loaded.tensors)
      sources.push_back({entry.name, entry.value.shape(), entry.value.dtype()});
    for (auto [target, source] :
         match_or_refuse(sources, path, loaded.global_step, into, options, result))
      target->value.copy_from(loaded.tensors[source].value);
    if (unused_values)
      for (const std::string& name : result.unused)
        unused_values->push_back(loaded.find(name)->value);
    take_blobs(loaded.blobs, loaded.global_step, into, result);
    return result;
  }
  const VerifiedCheckpoint file(path);
  const CheckpointInfo& info = file.info();
  for (const TensorInfo& tensor : info.tensors)
    sources.push_back({tensor.name, tensor.shape, tensor.dtype});
  const auto pairs = match_or_refuse(sources, path, info.global_step, into, options, result);
  if (options.verify_first) file.verify_all();
  // Every read, into a target or into a new tensor for an unused one, in file order.
  struct Read {
    Tensor* value;
    size_t source;
    const TensorEntry* target;  // null for an unused tensor
  };
  std::vector<Read> reads;
  for (auto [target, source] : pairs) reads.push_back({&target->value, source, target});
  if (unused_values) {
    std::unordered_map<std::string_view, size_t> by_name;
    for (size_t i = 0; i < info.tensors.size(); ++i) by_name[info.tensors[i].name] = i;
    unused_values->reserve(result.unused.size());  // stable addresses for `reads`
    for (const std::string& name : result.unused) {
      const TensorInfo& tensor = info.tensors[by_name.at(name)];
      unused_values->push_back(Tensor::empty(tensor.shape, tensor.dtype));
      reads.push_back({&unused_values->back(), by_name.at(name), nullptr});
    }
  }
  std::vector<size_t> rank(info.tensors.size());
  for (size_t k = 0; k < file.file_order().size(); ++k) rank[file.file_order()[k]] = k;
  std::sort(reads.begin(), reads.end(),
            [&](const Read& a, const Read& b) { return rank[a.source] < rank[b.source]; });
  file.check_unchanged();
  size_t done = 0;
  try {
    for (; done < reads.size(); ++done) file.read_into(reads[done].source, *reads[done].value);
    file.check_unchanged();
  } catch (const DataLossError&) {
    // read_into writes a CPU target before its checksum is known; another device's only after.
    if (done < reads.size() && reads[done].value->device().is_cpu()) ++done;
    for (size_t i = 0; i < done && i < reads.size(); ++i)
      if (reads[i].target) overwritten.push_back(reads[i].target);
    throw;
  }
  take_blobs(file.blobs(), info.global_step, into, result);
  return result;
}

std::vector<std::string> names_of(const std::vector<const TensorEntry*>& entries) {
  std::vector<std::string> names;
  for (const TensorEntry* entry : entries)
    if (std::find(names.begin(), names.end(), entry->name) == names.end())
      names.push_back(entry->name);
  return names;
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

// Each checkpoint tried is read straight into the targets (restore_file). A damaged one found
// mid-read leaves the tensors read so far overwritten: the fallback to an earlier checkpoint
// writes them again, and the error says so when nothing can (verify_first avoids this, at the
// cost of a second pass over the file).
RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options) {
  return restore_into(path_or_dir, into, options, nullptr);
}

RestoreResult restore_into(const std::string& path_or_dir, TensorBundle& into,
                           const RestoreOptions& options, std::vector<Tensor>* unused_values) {
  std::vector<std::string> skipped;
  std::vector<const TensorEntry*> overwritten;  // written from a damaged checkpoint
  RestoreResult result;
  try {
    result = open_with_fallback(path_or_dir, nullptr, &skipped, [&](const std::string& path) {
      return restore_file(path, into, options, overwritten, unused_values);
    });
  } catch (const ModelMismatch& mismatch) {
    std::rethrow_exception(mismatch.error);
  } catch (const DataLossError& error) {
    if (overwritten.empty()) throw;
    const std::vector<std::string> names = names_of(overwritten);
    throw DataLossError(fmt::format(
        "{}. The model's {} tensor(s) {} were already read from a damaged checkpoint when it "
        "failed its checksums: initialize the model again or restore a good checkpoint into "
        "it before using it (RestoreOptions::verify_first checks every checksum before writing "
        "anything)",
        error.what(), names.size(), quoted_list(names)));
  }
  // An earlier checkpoint rewrote every tensor it holds; one that it lacks (allow_missing)
  // would keep the damaged file's bytes.
  std::vector<std::string> stale;
  for (const std::string& name : names_of(overwritten))
    if (std::find(result.missing.begin(), result.missing.end(), name) != result.missing.end())
      stale.push_back(name);
  if (!stale.empty())
    throw DataLossError(fmt::format(
        "Restored {}, but the model's {} tensor(s) {} were first read from the damaged "
        "checkpoint {} and {} has none to replace them: initialize them again before using the "
        "model (RestoreOptions::verify_first checks every checksum before writing anything)",
        result.path, stale.size(), quoted_list(stale), skipped.front(), result.path));
  result.skipped = std::move(skipped);
  return result;
}

}  // namespace est::checkpoint
