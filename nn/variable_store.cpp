// VariableStore: creation, lookup by name and by storage, in-place assignment, staged restores.
#include "nn/variable_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/restore_error.h"
#include "ops/autograd.h"
#include "ops/copy.h"

namespace est::nn {

using ops::shape_str;
namespace {

// ErrorType: InvalidArgumentError when assigning, RestoreMismatchError when restoring.
template <class ErrorType>
void check_same_layout(std::string_view name, const Tensor& variable, const Tensor& value,
                       std::string_view what) {
  if (variable.shape() != value.shape() || variable.dtype() != value.dtype())
    throw ErrorType(fmt::format(
        "{} variable '{}': it has shape {} and dtype {}, the value has shape {} and dtype {}; "
        "check that the model matches the one that produced the value",
        what, name, shape_str(variable.shape()), dtype_name(variable.dtype()),
        shape_str(value.shape()), dtype_name(value.dtype())));
}

}  // namespace

Device VariableStore::device_for(DType dtype) const {
  return is_floating(dtype) ? device_ : Device::cpu();
}

Tensor VariableStore::create(const std::string& name, Tensor initial_value, bool trainable) {
  if (name.empty()) throw InvalidArgumentError("VariableStore::create: empty variable name");
  if (!initial_value.defined())
    throw InvalidArgumentError("VariableStore::create: undefined initial value for '" + name + "'");
  std::lock_guard lock(mutex_);
  if (index_.count(name))
    throw AlreadyExistsError("variable '" + name +
                             "' already exists in the store; use find() to reuse it");
  // A variable is a leaf: it never carries the history of the ops that computed its value.
  Tensor value = initial_value.grad_node() ? initial_value.detach() : initial_value;
  if (value.device() != device_for(value.dtype())) {
    ops::NoGradGuard no_grad;
    value = ops::copy_to(value, device_for(value.dtype()));
  }
  if (auto staged = pending_.find(name); staged != pending_.end()) {
    check_same_layout<RestoreMismatchError>(name, value, staged->second, "restoring");
    value.copy_from(staged->second);
    pending_.erase(staged);
  }
  if (trainable && !is_floating(value.dtype()))
    throw InvalidArgumentError(
        fmt::format("variable '{}' has dtype {}: only floating variables "
                    "can be trainable; pass trainable = false",
                    name, dtype_name(value.dtype())));
  value.set_requires_grad(trainable);
  index_.emplace(name, variables_.size());
  variables_.push_back({name, value, trainable});
  return value;
}

bool VariableStore::contains(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return index_.count(std::string(name)) != 0;
}

std::optional<Variable> VariableStore::find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return variables_[it->second];
}

Variable VariableStore::get(std::string_view name) const {
  if (auto found = find(name)) return *found;
  throw NotFoundError(
      fmt::format("variable '{}' is not in the store ({} variables); was the "
                  "layer that creates it called, under the same scope?",
                  name, size()));
}

std::string VariableStore::name_of(const Tensor& value) const {
  std::lock_guard lock(mutex_);
  for (const Variable& v : variables_)
    if (v.value.impl() == value.impl()) return v.name;
  for (const Variable& v : variables_)
    if (v.value.shares_storage(value) && v.value.shape() == value.shape()) return v.name;
  throw NotFoundError("tensor " + (value.defined() ? shape_str(value.shape()) : "(undefined)") +
                      " is not a variable of this store; pass the tensors returned by "
                      "get_variable() or trainable_variables()");
}

std::vector<Variable> VariableStore::variables() const {
  std::lock_guard lock(mutex_);
  return variables_;
}

std::vector<Variable> VariableStore::trainable_variables() const {
  std::lock_guard lock(mutex_);
  std::vector<Variable> out;
  for (const Variable& v : variables_)
    if (v.trainable) out.push_back(v);
  return out;
}

std::vector<std::string> VariableStore::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  out.reserve(variables_.size());
  for (const Variable& v : variables_) out.push_back(v.name);
  return out;
}

size_t VariableStore::size() const {
  std::lock_guard lock(mutex_);
  return variables_.size();
}

void VariableStore::assign(std::string_view name, const Tensor& value) {
  Variable variable = get(name);
  check_same_layout<InvalidArgumentError>(name, variable.value, value, "assigning to");
  ops::NoGradGuard no_grad;
  variable.value.copy_from(value);
}

void VariableStore::restore(const std::string& name, const Tensor& value) {
  {
    std::lock_guard lock(mutex_);
    if (!index_.count(name)) {
      pending_[name] = value.clone();
      return;
    }
  }
  assign(name, value);
}

bool VariableStore::has_pending_restore(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return pending_.count(std::string(name)) > 0;
}

std::vector<std::string> VariableStore::pending_restores() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, value] : pending_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

Tensor get_or_create_global_step(VariableStore& store) {
  if (auto found = store.find(kGlobalStepName)) return found->value;
  try {
    return store.create(std::string(kGlobalStepName), Tensor::zeros({}, DType::kI64), false);
  } catch (const AlreadyExistsError&) {  // another replica thread created it first
    return store.get(kGlobalStepName).value;
  }
}

int64_t read_global_step(VariableStore& store) {
  return static_cast<int64_t>(get_or_create_global_step(store).item());
}

}  // namespace est::nn
