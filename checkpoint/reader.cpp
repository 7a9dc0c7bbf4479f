// The HDF5 reader's public side (reader.h): reading a checkpoint's metadata, all of it, or one
// tensor, through CheckpointFile (checkpoint_file.h).
#include "checkpoint/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/layout.h"
#include "checkpoint/state_file.h"

namespace est::checkpoint {
namespace detail {

std::vector<size_t> file_order(const CheckpointFile& file, const std::vector<TensorInfo>& tensors) {
  std::vector<uint64_t> positions;
  for (const TensorInfo& tensor : tensors) positions.push_back(file.data_position(tensor));
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return positions[a] < positions[b]; });
  return order;
}

}  // namespace detail

namespace {

using detail::CheckpointFile;
using detail::file_order;
using detail::with_file_context;

TensorBundle load_file(const std::string& path) {
  CheckpointFile file(path);
  CheckpointInfo info = file.info();
  TensorBundle bundle;
  bundle.global_step = info.global_step;
  std::vector<size_t> order = file_order(file, info.tensors);
  std::vector<Tensor> values(info.tensors.size());
  for (size_t i : order) values[i] = file.read_tensor(info.tensors[i]);
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const TensorInfo& tensor = info.tensors[i];
    bundle.tensors.push_back({tensor.name, std::move(values[i]), tensor.kind, tensor.trainable});
  }
  for (const BlobInfo& blob : info.blobs) bundle.blobs.push_back({blob.name, file.read_blob(blob)});
  return bundle;
}

Tensor load_one(const std::string& file_path, const std::string& name) {
  CheckpointFile file(file_path);
  for (auto [kind, group] : {std::pair{EntryKind::kVariable, layout::kVariablesGroup},
                             std::pair{EntryKind::kSlot, layout::kSlotsGroup}}) {
    if (detail::dataset_exists(file.file(), fmt::format("{}/{}", group, name)))
      return file.read_tensor(file.describe(name, kind, group));
  }
  throw NotFoundError(fmt::format(
      "Checkpoint {} has no variable \"{}\"; list_variables() (or est-ckpt {}) shows what it "
      "holds",
      file_path, name, file_path));
}

}  // namespace

std::string resolve_checkpoint_path(const std::string& path_or_dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(path_or_dir, error)) return path_or_dir;
  std::optional<std::string> latest = latest_checkpoint(path_or_dir);
  if (!latest)
    throw NotFoundError(
        fmt::format("No checkpoint in {}: it has no \"checkpoint\" state file naming an existing "
                    "checkpoint; train first or pass a checkpoint file",
                    path_or_dir));
  return *latest;
}

CheckpointInfo read_info(const std::string& path_or_dir) {
  detail::Hdf5Quiet quiet;
  const std::string path = resolve_checkpoint_path(path_or_dir);
  return with_file_context(path, [&] { return CheckpointFile(path).info(); });
}

TensorBundle load(const std::string& path_or_dir) {
  detail::Hdf5Quiet quiet;
  const std::string path = resolve_checkpoint_path(path_or_dir);
  return with_file_context(path, [&] { return load_file(path); });
}

std::vector<TensorInfo> list_variables(const std::string& path_or_dir) {
  return read_info(path_or_dir).tensors;
}

Tensor load_variable(const std::string& path_or_dir, std::string_view name) {
  detail::Hdf5Quiet quiet;
  const std::string path = resolve_checkpoint_path(path_or_dir);
  return with_file_context(path, [&] { return load_one(path, std::string(name)); });
}

void verify(const std::string& path_or_dir) { (void)load(path_or_dir); }

}  // namespace est::checkpoint
