// VerifiedCheckpoint (verified_checkpoint.h): an est checkpoint file opened for a restore in
// place, over the reader's CheckpointFile (checkpoint_file.h).
#include "checkpoint/verified_checkpoint.h"

#include <fmt/format.h>

#include "checkpoint/checkpoint_file.h"

namespace est::checkpoint {

using detail::CheckpointFile;
using detail::with_file_context;

struct VerifiedCheckpoint::State {
  explicit State(const std::string& path) : file(path), info(file.info()), stamp(file.stamp()) {}
  CheckpointFile file;
  CheckpointInfo info;
  std::pair<int64_t, int64_t> stamp;         // size and mtime when opened
  std::vector<size_t> order;                 // tensor indices in file order
  std::vector<std::optional<uint64_t>> raw;  // per tensor: where its bytes lie, if raw
  std::vector<Tensor> staged;                // per tensor without a raw location: its value
  std::vector<bool> verified;                // per tensor: its CRC is known good (verify_all)
  std::vector<Blob> blobs;
};

VerifiedCheckpoint::VerifiedCheckpoint(const std::string& path) {
  detail::Hdf5Quiet quiet;
  state_ = with_file_context(path, [&] {
    auto state = std::make_unique<State>(path);
    const std::vector<TensorInfo>& tensors = state->info.tensors;
    state->order = detail::file_order(state->file, tensors);
    state->raw.resize(tensors.size());
    state->staged.resize(tensors.size());
    state->verified.resize(tensors.size());
    for (size_t i : state->order) {
      state->raw[i] = state->file.raw_location(tensors[i]);
      if (!state->raw[i]) state->staged[i] = state->file.read_tensor(tensors[i]);
    }
    for (const BlobInfo& blob : state->info.blobs)
      state->blobs.push_back({blob.name, state->file.read_blob(blob)});
    return state;
  });
}

VerifiedCheckpoint::~VerifiedCheckpoint() = default;

const CheckpointInfo& VerifiedCheckpoint::info() const { return state_->info; }

std::vector<Blob> VerifiedCheckpoint::blobs() const { return state_->blobs; }

const std::vector<size_t>& VerifiedCheckpoint::file_order() const { return state_->order; }

void VerifiedCheckpoint::verify_all() const {
  detail::Hdf5Quiet quiet;
  std::vector<char> buffer;
  for (size_t i : state_->order) {
    if (!state_->raw[i] || state_->verified[i]) continue;
    state_->file.verify_raw(state_->info.tensors[i], *state_->raw[i], buffer);
    state_->verified[i] = true;
  }
}

void VerifiedCheckpoint::read_into(size_t index, Tensor& target) const {
  if (state_->staged[index].defined()) {
    target.copy_from(state_->staged[index]);
    return;
  }
  const TensorInfo& info = state_->info.tensors[index];
  Tensor host = target.device().is_cpu() ? target : Tensor::empty(info.shape, info.dtype);
  char* out = static_cast<char*>(host.raw_data());
  if (state_->verified[index])  // the CRC was checked by verify_all: copy only
    state_->file.read_raw(fmt::format("\"{}\"", info.name), *state_->raw[index], host.nbytes(), out,
                          {});
  else
    state_->file.read_raw_verified(info, *state_->raw[index], out);
  if (!host.shares_storage(target)) target.copy_from(host);
}
void VerifiedCheckpoint::check_unchanged() const {
  if (state_->file.stamp() != state_->stamp)
    throw DataLossError(fmt::format(
        "Checkpoint {} changed on disk while it was being restored (its size or modification "
        "time moved after its checksums were verified); checkpoints are written under a "
        "temporary name and renamed into place, so something else rewrote it: restore again",
        state_->info.path));
}

}  // namespace est::checkpoint
