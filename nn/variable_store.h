// VariableStore: every variable of a model, by full name, across steps.
//
// The store is what a checkpoint saves and restores: layer weights (`dense/kernel`), moving
// statistics, optimizer slots (`dense/kernel/Adam`), `beta1_power`, `global_step`. It outlives
// the ModelContext of each model_fn call, so the same code finds the same variables next step.
// A variable's storage never changes after creation: optimizers, moving averages and restores
// write into it in place, so tensors that alias it (an all-reduce buffer, a prefetched copy on
// another thread) stay valid. Lookups and creation are guarded by a mutex so replicas on
// several threads can share one store.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ops/tensor.h"

namespace est::nn {

struct Variable {
  std::string name;  // full name: "block1/dense/kernel"
  Tensor value;      // requires_grad when trainable
  bool trainable = false;
};

class VariableStore {
 public:
  // `device`: where floating variables live (default /cpu:0).
  explicit VariableStore(Device device = {}) : device_(device) {}
  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  Device device() const { return device_; }
  // Where a variable of `dtype` lives in this store: device() for floating dtypes, else the
  // host.
  Device device_for(DType dtype) const;

  // Adds a variable that must not exist yet (AlreadyExistsError otherwise). The store keeps
  // `initial_value` itself (not a copy) when it is on device_for(its dtype), else a copy there, and
  // sets its requires_grad to `trainable`. When a value for `name` was staged by restore() before
  // the variable existed, that value is used instead (its shape and dtype must match:
  // InvalidArgumentError otherwise).
  Tensor create(const std::string& name, Tensor initial_value, bool trainable);

  bool contains(std::string_view name) const;
  std::optional<Variable> find(std::string_view name) const;
  Variable get(std::string_view name) const;  // NotFoundError naming the variable
  // The name under which `value` (a handle on a variable's storage) is stored; NotFoundError
  // when it is not a variable of this store.
  std::string name_of(const Tensor& value) const;

  // All variables in creation order (a snapshot: safe to hold while others create more).
  std::vector<Variable> variables() const;
  std::vector<Variable> trainable_variables() const;
  std::vector<std::string> names() const;
  size_t size() const;

  // Writes `value` into an existing variable in place (no gradient recorded). Shape and dtype
  // must match (InvalidArgumentError naming the variable and both shapes); NotFoundError when
  // the variable does not exist.
  void assign(std::string_view name, const Tensor& value);
  // Checkpoint restore: assigns when the variable exists, otherwise stages the value so that
  // the variable takes it when it is created (restoring before the first model_fn call).
  void restore(const std::string& name, const Tensor& value);
  // Names of staged values that no variable has claimed yet (a checkpoint entry the model
  // never created: the caller decides whether that is an error).
  std::vector<std::string> pending_restores() const;
  // Whether a restored value waits for variable `name` (create() will take it).
  bool has_pending_restore(std::string_view name) const;

 private:
  Device device_;
  mutable std::mutex mutex_;
  std::vector<Variable> variables_;                  // creation order
  std::unordered_map<std::string, size_t> index_;    // name -> position in variables_
  std::unordered_map<std::string, Tensor> pending_;  // staged by restore()
};

// The int64 scalar `global_step` (non-trainable), created at 0 when missing.
inline constexpr std::string_view kGlobalStepName = "global_step";
Tensor get_or_create_global_step(VariableStore& store);
int64_t read_global_step(VariableStore& store);

}  // namespace est::nn
