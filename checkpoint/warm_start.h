// Warm start, as tf.estimator.WarmStartSettings and tf.compat.v1.train.warm_start
// (tensorflow/python/training/warm_starting_util.py): initialise some variables of a new model
// from another model's checkpoint, when the new model has no checkpoint of its own.
//
// What is warm-started (vars_to_warm_start), in TF's three forms:
//   - one regular expression (default ".*"), matched at the start of the name (re.match),
//     over the trainable variables only;
//   - a list of regular expressions, each matched the same way over every variable: optimizer
//     slots ("dense/kernel/Adagrad"), moving statistics and global_step included, as TF's
//     GLOBAL_VARIABLES collection;
//   - none (std::nullopt): only the trainable variables named in var_name_to_vocab_info.
// Slots do not exist yet when the warm start runs (the optimizer makes them at its first
// update), so with the list form the checkpoint's entries that the patterns select and the new
// model lacks so far are handed back as `staged`: the caller stages them in the variable store
// (VariableStore::restore) and a slot takes its value when it is created; those the model never
// creates are ignored, as TF never sees them.
//
// var_name_to_prev_var_name maps a new name to its name in the old checkpoint; var_name_to_vocab_
// info remaps the rows (axis 0: embeddings, linear weights) or columns (axis 1: a class layer)
// of a variable whose vocabulary changed (warm_start_vocab.cpp). Keys of either map that name no
// selected variable are an InvalidArgumentError, as TF's ValueError.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/bundle.h"
#include "nn/initializers.h"

namespace est::checkpoint {

// tf.compat.v1.train.VocabInfo.
struct VocabInfo {
  std::string new_vocab;        // the new vocabulary file, one entry per line
  int64_t new_vocab_size = 0;   // entries of it that the model uses
  int64_t num_oov_buckets = 0;  // rows (columns on axis 1) after them, never copied
  std::string old_vocab;        // the vocabulary of the checkpoint's variable
  int64_t old_vocab_size = -1;  // entries of it used when the checkpoint was made; -1: all
  // Values for entries not in the old vocabulary and for OOV buckets, drawn for the variable's
  // whole shape (seed 0) and taken where needed; zeros when empty.
  nn::Initializer backup_initializer;
  int axis = 0;  // 0: the vocabulary indexes rows; 1: columns
};

// TF's vars_to_warm_start: one regex (trainable variables), a list of regexes (every variable,
// slots included) or none (only var_name_to_vocab_info's variables).
class VarsToWarmStart {
 public:
  VarsToWarmStart(const char* regex) : regex_(regex) {}
  VarsToWarmStart(std::string regex) : regex_(std::move(regex)) {}
  VarsToWarmStart(std::initializer_list<std::string> regexes) : list_(regexes) {}
  VarsToWarmStart(std::vector<std::string> regexes) : list_(std::move(regexes)) {}
  VarsToWarmStart(std::nullopt_t) {}

  const std::optional<std::string>& regex() const { return regex_; }
  const std::optional<std::vector<std::string>>& list() const { return list_; }
  bool is_none() const { return !regex_ && !list_; }
  std::string str() const;  // for messages: "\"encoder/\"", "[\"a\", \"b\"]", "None"

 private:
  std::optional<std::string> regex_;
  std::optional<std::vector<std::string>> list_;
};

struct WarmStartSettings {
  // est's checkpoint file or a directory (its latest), or TensorFlow's checkpoint: a prefix
  // (model.ckpt-1000), a directory whose `checkpoint` state file names one, or a SavedModel
  // directory (its variables/variables). TF1's slot names are est's (source.h).
  std::string ckpt_to_initialize_from;
  VarsToWarmStart vars_to_warm_start = ".*";
  // New name -> VocabInfo, for variables whose vocabulary changed.
  std::map<std::string, VocabInfo> var_name_to_vocab_info;
  // New name -> name in the old checkpoint, for variables that were renamed.
  std::map<std::string, std::string> var_name_to_prev_var_name;
};

struct WarmStartResult {
  std::string path;                       // the checkpoint read
  std::vector<std::string> warm_started;  // names in the new model, assigned
  // Checkpoint values for variables the patterns select that the model does not have yet
  // (optimizer slots), by their new name: stage them in the store.
  std::vector<std::pair<std::string, Tensor>> staged;
};

// Applies `settings` to `into` unless `model_dir` already has a checkpoint (then nullopt:
// restoring that checkpoint takes precedence). A selected variable missing from the old
// checkpoint raises NotFoundError naming both names; shape or dtype mismatches raise
// InvalidArgumentError naming the variable and both shapes. Nothing is assigned unless every
// selected variable fits. Logs TF's lines ("Warm-starting from: ...", then one line per group:
// the variables copied by name, each vocabulary-remapped variable, the staged slots, and
// "Warm-started N variables.") unless `log` is false (the other replicas' stores).
std::optional<WarmStartResult> warm_start(const std::string& model_dir,
                                          const WarmStartSettings& settings, TensorBundle& into,
                                          bool log = true);

// The vocabulary remapping of one variable (warm_start_vocab.cpp): `old_value` (the
// checkpoint's tensor) remapped onto the shape and dtype of `target`, by `info`. Returns how
// many rows (columns) came from the old tensor. InvalidArgumentError naming `name` when the
// sizes do not fit; NotFoundError naming a vocabulary file that cannot be read.
struct VocabRemap {
  Tensor value;
  int64_t copied = 0;
};
VocabRemap remap_with_vocab(const std::string& name, const Tensor& target, const Tensor& old_value,
                            const VocabInfo& info);

}  // namespace est::checkpoint
