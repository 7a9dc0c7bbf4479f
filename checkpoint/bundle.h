// TensorBundle: what one checkpoint holds, independent of the classes that own the values.
//
// A bundle is an ordered list of named tensors (model variables and optimizer slots), named
// byte blobs (an input pipeline's position, RNG state) and the global step. The variable store
// adapter, the data pipeline and the estimator each fill or read one; the file format
// (FORMAT.md) maps it onto HDF5. Tensors in a bundle are handles: restore_into() writes into
// their storage in place, snapshot() deep-copies them for a background save.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::checkpoint {

// Which HDF5 group an entry is written to: /variables or /slots. Optimizer slots are named
// after their variable ("dense/kernel/Adam"), which HDF5 cannot hold beside a dataset
// "dense/kernel" in one group, so they get their own.
enum class EntryKind : uint8_t { kVariable, kSlot };

struct TensorEntry {
  std::string name;  // "dense/kernel"; '/' separates HDF5 groups
  Tensor value;
  EntryKind kind = EntryKind::kVariable;
  bool trainable = true;  // stored as an attribute; warm start only touches trainable variables
};

struct Blob {
  std::string name;   // "iterator", "rng/train"
  std::string bytes;  // opaque to the checkpoint
};

struct TensorBundle {
  int64_t global_step = 0;
  std::vector<TensorEntry> tensors;
  std::vector<Blob> blobs;

  TensorBundle& add_variable(std::string name, Tensor value, bool trainable = true);
  TensorBundle& add_slot(std::string name, Tensor value);
  TensorBundle& add_blob(std::string name, std::string bytes);

  TensorEntry* find(std::string_view name);
  const TensorEntry* find(std::string_view name) const;
  const Blob* find_blob(std::string_view name) const;

  // A deep copy: every tensor cloned (no autograd history), so the copy is unaffected by later
  // updates of the originals. CPU tensors only (UnimplementedError naming the entry otherwise).
  TensorBundle snapshot() const;
  size_t tensor_bytes() const;  // sum of the tensors' sizes
};

// Checks what a file needs: names non-empty, made of '/'-separated non-empty components other
// than "." and "..", unique among tensors and among blobs, and no name of one group being the
// group of another ("a/b" beside "a/b/c" in /variables). Tensors must be defined and on the
// CPU. InvalidArgumentError naming the entry and what to change otherwise.
void validate_bundle(const TensorBundle& bundle, const std::string& where);

}  // namespace est::checkpoint
