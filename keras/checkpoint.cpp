// keras::Checkpoint, CheckpointManager and latest_checkpoint (see checkpoint.h), following
// tensorflow/python/checkpoint/checkpoint.py (Checkpoint.save/write/restore) and
// checkpoint_management.py (CheckpointManager.__init__, save, _sweep, _record_state;
// latest_checkpoint).
#include "keras/checkpoint.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "checkpoint/writer.h"
#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSaveCounterBlob = "save_counter";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The est file of a prefix ("<dir>/ckpt-1" -> "<dir>/ckpt-1.h5").
std::string file_of(const std::string& path) { return path.ends_with(".h5") ? path : path + ".h5"; }

void put(checkpoint::TensorBundle& bundle, const checkpoint::TensorEntry& entry) {
  if (auto* found = bundle.find(entry.name))
    found->value = entry.value;
  else
    bundle.tensors.push_back(entry);
}

}  // namespace

Checkpoint::Checkpoint(CheckpointObjects objects) : objects_(objects) {
  if (!objects_.model)
    throw InvalidArgumentError("keras::Checkpoint: pass the model ({.model = &model})");
  if (objects_.optimizer &&
      (!objects_.model->optimizer() || objects_.optimizer != &*objects_.model->optimizer()))
    throw InvalidArgumentError(fmt::format(
        "keras::Checkpoint: the optimizer must be model \"{}\"'s own (&*model.optimizer(), "
        "after compile)",
        objects_.model->name()));
}

std::string Checkpoint::write(const std::string& file_prefix) {
  Model& model = *objects_.model;
  checkpoint::TensorBundle state = model.read_state();
  std::set<std::string> weights;
  for (const auto& [name, spec] : model.weights()) weights.insert(name);
  checkpoint::TensorBundle out;
  for (const auto& entry : state.tensors)
    if (weights.count(entry.name) || objects_.optimizer) out.tensors.push_back(entry);
  out.global_step = objects_.optimizer ? state.global_step : 0;
  out.add_blob(kSaveCounterBlob, std::to_string(save_counter_));
  fs::path file(file_of(file_prefix));
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  checkpoint::save(file.string(), out);
  return file_prefix;
}

std::string Checkpoint::save(const std::string& file_prefix) {
  ++save_counter_;
  std::string path = write(fmt::format("{}-{}", file_prefix, save_counter_));
  std::string directory = fs::path(file_prefix).parent_path().string();
  std::string name = fs::path(path).filename().string();
  checkpoint::write_checkpoint_state(directory.empty() ? "." : directory,
                                     {.model_checkpoint_path = name,
                                      .all_model_checkpoint_paths = {name},
                                      .all_model_checkpoint_timestamps = {now_seconds()}});
  return path;
}

void Checkpoint::restore(const std::string& save_path) {
  if (save_path.empty()) return;
  std::string file = file_of(save_path);
  if (!fs::exists(file))
    throw NotFoundError(
        fmt::format("Could not find checkpoint at {} (no file {}); pass a path that save() or "
                    "CheckpointManager::save() returned, or keras::latest_checkpoint(directory)",
                    save_path, file));
  Model& model = *objects_.model;
  checkpoint::TensorBundle loaded = checkpoint::load(file);
  checkpoint::TensorBundle target = model.read_state();
  std::set<std::string> weights;
  for (const auto& [name, spec] : model.weights()) {
    weights.insert(name);
    const checkpoint::TensorEntry* entry = loaded.find(name);
    if (!entry)
      throw NotFoundError(fmt::format(
          "Checkpoint {} has no value for weight \"{}\" of model \"{}\"; it was saved from "
          "another model",
          file, name, model.name()));
    if (entry->value.shape() != spec.shape)
      throw InvalidArgumentError(fmt::format(
          "Checkpoint {}: weight \"{}\" has shape {}, model \"{}\" has {}", file, name,
          ops::shape_str(entry->value.shape()), model.name(), ops::shape_str(spec.shape)));
    put(target, *entry);
  }
  if (objects_.optimizer) {
    for (const auto& entry : loaded.tensors)
      if (!weights.count(entry.name)) put(target, entry);
    target.global_step = loaded.global_step;
  }
  if (const auto* blob = loaded.find_blob(kSaveCounterBlob))
    save_counter_ = std::stoll(blob->bytes);
  model.write_state(target);
}

std::optional<std::string> latest_checkpoint(const std::string& directory) {
  auto state = checkpoint::read_checkpoint_state(directory);
  if (!state || state->model_checkpoint_path.empty()) return std::nullopt;
  std::string path = checkpoint::resolve_in_directory(directory, state->model_checkpoint_path);
  if (!fs::exists(file_of(path))) return std::nullopt;
  return path;
}

CheckpointManager::CheckpointManager(Checkpoint& checkpoint, std::string directory,
                                     std::optional<int> max_to_keep, std::string checkpoint_name,
                                     std::optional<double> keep_checkpoint_every_n_hours)
    : checkpoint_(checkpoint),
      directory_(std::move(directory)),
      max_to_keep_(max_to_keep),
      prefix_((fs::path(directory_) / checkpoint_name).string()),
      keep_every_hours_(keep_checkpoint_every_n_hours) {
  if (max_to_keep_ && *max_to_keep_ <= 0)
    throw InvalidArgumentError(
        fmt::format("Expected a positive integer or `None` (nullopt) for `max_to_keep`, got {}",
                    *max_to_keep_));
  double now = now_seconds();
  auto state = checkpoint::read_checkpoint_state(directory_);
  last_preserved_ = now - 1;
  if (!state) return;
  latest_ = checkpoint::resolve_in_directory(directory_, state->model_checkpoint_path);
  if (state->last_preserved_timestamp <= now) last_preserved_ = state->last_preserved_timestamp;
  const auto& paths = state->all_model_checkpoint_paths;
  for (size_t i = 0; i < paths.size(); ++i) {
    double timestamp = i < state->all_model_checkpoint_timestamps.size()
                           ? std::min(state->all_model_checkpoint_timestamps[i], now)
                           : last_preserved_;
    if (timestamp > last_preserved_)  // without timestamps: never deleted, as TensorFlow
      kept_.emplace_back(checkpoint::resolve_in_directory(directory_, paths[i]), timestamp);
  }
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::vector<std::string> out;
  for (const auto& [path, timestamp] : kept_) out.push_back(path);
  return out;
}

std::string CheckpointManager::save(std::optional<int64_t> checkpoint_number) {
  checkpoint_.set_save_counter(checkpoint_.save_counter() + 1);
  int64_t number = checkpoint_number.value_or(checkpoint_.save_counter());
  std::string path = checkpoint_.write(fmt::format("{}-{}", prefix_, number));
  std::erase_if(kept_, [&](const auto& kept) { return kept.first == path; });
  kept_.emplace_back(path, now_seconds());
  latest_ = path;
  record_state();  // first with the new checkpoint, then without the deleted ones
  sweep();
  record_state();
  return path;
}

void CheckpointManager::sweep() {
  if (!max_to_keep_) return;
  while (kept_.size() > static_cast<size_t>(*max_to_keep_)) {
    auto [path, timestamp] = kept_.front();
    kept_.erase(kept_.begin());
    if (keep_every_hours_ && timestamp - *keep_every_hours_ * 3600 >= last_preserved_) {
      last_preserved_ = timestamp;
      continue;
    }
    std::error_code ignored;
    fs::remove(file_of(path), ignored);
  }
}

void CheckpointManager::record_state() const {
  checkpoint::CheckpointState state;
  auto relative = [&](const std::string& path) { return fs::path(path).filename().string(); };
  state.model_checkpoint_path = latest_ ? relative(*latest_) : "";
  for (const auto& [path, timestamp] : kept_) {
    state.all_model_checkpoint_paths.push_back(relative(path));
    state.all_model_checkpoint_timestamps.push_back(timestamp);
  }
  state.last_preserved_timestamp = last_preserved_;
  checkpoint::write_checkpoint_state(directory_, state);
}

}  // namespace est::keras
