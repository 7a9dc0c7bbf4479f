// TensorBundle construction, lookup, snapshots (fenced copies, ops/copy_fence.h) and the
// validation a file layout needs.
#include "checkpoint/bundle.h"

#include "ops/copy_fence.h"

#include <fmt/format.h>

#include <set>
#include <unordered_set>

namespace est::checkpoint {
namespace {

std::string_view kind_group(EntryKind kind) {
  return kind == EntryKind::kVariable ? "/variables" : "/slots";
}

void validate_name(std::string_view name, std::string_view what, const std::string& where) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(
        fmt::format("{}: {} name \"{}\" {}; use '/'-separated names like \"dense/kernel\"", where,
                    what, name, why));
  };
  if (name.empty()) throw bad("is empty");
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty()) throw bad("has an empty component (a leading, trailing or double '/')");
    if (part == "." || part == "..") throw bad("has a \".\" or \"..\" component");
    start = end + 1;
  }
}

// Names in one HDF5 group must not be the group of another name there.
void check_no_nesting(const std::set<std::string>& names, std::string_view group,
                      const std::string& where) {
  for (const std::string& name : names) {
    for (size_t slash = name.find('/'); slash != std::string::npos;
         slash = name.find('/', slash + 1)) {
      std::string prefix = name.substr(0, slash);
      if (names.count(prefix))
        throw InvalidArgumentError(fmt::format(
            "{}: \"{}\" and \"{}\" cannot both be stored in {}: HDF5 cannot hold a dataset "
            "\"{}\" that is also the group of \"{}\". Mark \"{}\" as an optimizer slot "
            "(EntryKind::kSlot) or rename one of them",
            where, prefix, name, group, prefix, name, name));
    }
  }
}

}  // namespace

TensorBundle& TensorBundle::add_variable(std::string name, Tensor value, bool trainable) {
  tensors.push_back({std::move(name), std::move(value), EntryKind::kVariable, trainable});
  return *this;
}

TensorBundle& TensorBundle::add_slot(std::string name, Tensor value) {
  tensors.push_back({std::move(name), std::move(value), EntryKind::kSlot, false});
  return *this;
}

TensorBundle& TensorBundle::add_blob(std::string name, std::string bytes) {
  blobs.push_back({std::move(name), std::move(bytes)});
  return *this;
}

TensorEntry* TensorBundle::find(std::string_view name) {
  for (TensorEntry& entry : tensors)
    if (entry.name == name) return &entry;
  return nullptr;
}

const TensorEntry* TensorBundle::find(std::string_view name) const {
  for (const TensorEntry& entry : tensors)
    if (entry.name == name) return &entry;
  return nullptr;
}

const Blob* TensorBundle::find_blob(std::string_view name) const {
  for (const Blob& blob : blobs)
    if (blob.name == name) return &blob;
  return nullptr;
}

TensorBundle TensorBundle::snapshot() const {
  TensorBundle copy;
  copy.global_step = global_step;
  copy.blobs = blobs;
  std::vector<Tensor> sources;
  sources.reserve(tensors.size());
  for (const TensorEntry& entry : tensors) {
    if (!entry.value.defined())
      throw InvalidArgumentError(fmt::format(
          "checkpoint snapshot: tensor \"{}\" is undefined; give every entry a value", entry.name));
    if (!entry.value.device().is_cpu())
      throw UnimplementedError(fmt::format(
          "checkpoint snapshot: tensor \"{}\" is on {}; checkpoints read host memory, so copy "
          "it to the CPU first",
          entry.name, entry.value.device().str()));
    sources.push_back(entry.value);
  }
  // The background copier takes the tensors a step writes first, first: non-trainable
  // variables (moving statistics, written in the forward pass), then the trainable ones in
  // creation order (the forward pass reads them in about that order), then the slots.
  std::vector<size_t> order;
  order.reserve(tensors.size());
  auto rank = [](const TensorEntry& entry) {
    if (entry.kind == EntryKind::kSlot) return 2;
    return entry.trainable ? 1 : 0;
  };
  for (int wanted = 0; wanted < 3; ++wanted)
    for (size_t i = 0; i < tensors.size(); ++i)
      if (rank(tensors[i]) == wanted) order.push_back(i);
  std::vector<Tensor> copies = ops::fenced_copies(sources, order);
  copy.tensors.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    copy.tensors.push_back(
        {tensors[i].name, std::move(copies[i]), tensors[i].kind, tensors[i].trainable});
  return copy;
}

size_t TensorBundle::tensor_bytes() const {
  size_t bytes = 0;
  for (const TensorEntry& entry : tensors)
    if (entry.value.defined()) bytes += entry.value.nbytes();
  return bytes;
}

void validate_bundle(const TensorBundle& bundle, const std::string& where) {
  std::unordered_set<std::string_view> seen;
  std::set<std::string> variables, slots, blobs;
  for (const TensorEntry& entry : bundle.tensors) {
    validate_name(entry.name, "tensor", where);
    if (!seen.insert(entry.name).second)
      throw InvalidArgumentError(fmt::format(
          "{}: tensor \"{}\" appears twice; each name may be saved once", where, entry.name));
    if (!entry.value.defined())
      throw InvalidArgumentError(
          fmt::format("{}: tensor \"{}\" is undefined; give it a value", where, entry.name));
    if (!entry.value.device().is_cpu())
      throw UnimplementedError(fmt::format(
          "{}: tensor \"{}\" is on {}; checkpoints read host memory, so copy it to the CPU "
          "first",
          where, entry.name, entry.value.device().str()));
    (entry.kind == EntryKind::kVariable ? variables : slots).insert(entry.name);
  }
  check_no_nesting(variables, kind_group(EntryKind::kVariable), where);
  check_no_nesting(slots, kind_group(EntryKind::kSlot), where);
  for (const Blob& blob : bundle.blobs) {
    validate_name(blob.name, "blob", where);
    if (!blobs.insert(blob.name).second)
      throw InvalidArgumentError(fmt::format(
          "{}: blob \"{}\" appears twice; each name may be saved once", where, blob.name));
  }
  check_no_nesting(blobs, "/state", where);
}

}  // namespace est::checkpoint
