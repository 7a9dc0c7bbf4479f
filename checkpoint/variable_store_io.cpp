// VariableStore <-> TensorBundle: slot detection by name, restore with staging.
#include "checkpoint/variable_store_io.h"

namespace est::checkpoint {
bool extends_another(const std::string& name, const std::unordered_set<std::string>& names) {
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
    if (names.count(name.substr(0, slash))) return true;
  return false;
}

TensorBundle bundle_from_store(const nn::VariableStore& store) {
  std::vector<nn::Variable> variables = store.variables();
  std::unordered_set<std::string> names;
  for (const nn::Variable& variable : variables) names.insert(variable.name);
  TensorBundle bundle;
  for (const nn::Variable& variable : variables) {
    const bool slot = extends_another(variable.name, names);
    bundle.tensors.push_back({variable.name, variable.value,
                              slot ? EntryKind::kSlot : EntryKind::kVariable, variable.trainable});
    if (variable.name == nn::kGlobalStepName && variable.value.numel() == 1)
      bundle.global_step = static_cast<int64_t>(variable.value.item());
  }
  return bundle;
}

RestoreResult restore_store(const std::string& path_or_dir, nn::VariableStore& store,
                            const RestoreOptions& options) {
  // Existing variables are read straight into their values; the rest come back as new tensors
  // from the same pass over the file.
  TensorBundle existing = bundle_from_store(store);
  std::vector<Tensor> unused_values;
  RestoreResult result = restore_into(path_or_dir, existing, options, &unused_values);
  for (size_t i = 0; i < result.unused.size(); ++i)
    store.restore(result.unused[i], unused_values[i]);
  return result;
}

}  // namespace est::checkpoint
