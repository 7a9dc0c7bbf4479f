// Checkpoints of an nn::VariableStore: variables, optimizer slots, trainable flags and the
// global step.
//
// The store does not mark slots; TF1 names them after their variable (`dense/kernel/Adam`),
// so a variable whose name extends another variable's name is written as a slot (/slots in
// the file), everything else as a variable (/variables). Restoring assigns variables that
// exist in place and stages the others (VariableStore::restore), so restoring before the first
// model_fn call works: each variable takes its value when it is created.
#pragma once

#include <string>
#include <unordered_set>

#include "checkpoint/bundle.h"
#include "checkpoint/restore.h"
#include "nn/variable_store.h"

namespace est::checkpoint {

// True when some '/'-prefix of `name` is another name in `names`: TF1's naming of a slot
// after its variable ("dense/kernel/Adam" beside "dense/kernel").
bool extends_another(const std::string& name, const std::unordered_set<std::string>& names);

// The store's variables as a bundle of handles (no copies): what CheckpointManager::save()
// takes, and what warm_start() and import_keras_h5() assign into. global_step is the value of
// the store's `global_step` variable (0 without one). Add blobs (iterator position, RNG state)
// before saving.
TensorBundle bundle_from_store(const nn::VariableStore& store);

// Restores `path_or_dir` (with the fallback of restore_into) into `store`. Variables that
// exist are checked first (shape and dtype: InvalidArgumentError naming the variable and both
// shapes, nothing restored) and assigned in place; variables of the store missing from the
// checkpoint raise NotFoundError unless options.allow_missing. Checkpoint tensors the store
// has no variable for yet are staged; they are listed in `unused` (and in
// store.pending_restores() until created). The checkpoint's blobs come back in `blobs`.
RestoreResult restore_store(const std::string& path_or_dir, nn::VariableStore& store,
                            const RestoreOptions& options = {});

}  // namespace est::checkpoint
