// ModelContext: scopes, per-call layer numbering and get_variable.
#include "nn/model_context.h"
#include "nn/context_control.h"
#include "nn/optimizer.h"

#include <fmt/format.h>

#include <utility>

#include "ops/autograd.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace est::nn {

using ops::shape_str;
namespace {

// Derives the second generator's seed so that dropout masks do not repeat the weights' draws.
constexpr uint64_t kRandomOpsSeedMix = 0x9e3779b97f4a7c15ULL;

}  // namespace

VariableScope::~VariableScope() {
  if (context_ != nullptr) context_->pop_scope();
}

ModelContext::ModelContext(VariableStore& store, Mode mode, uint64_t seed)
    : store_(&store),
      device_(store.device()),
      mode_(mode),
      initializer_generator_(seed),
      generator_(seed ^ kRandomOpsSeedMix) {}

ModelContext::~ModelContext() = default;
ModelContext::ModelContext(const ModelContext&) = default;
ModelContext& ModelContext::operator=(const ModelContext&) = default;
ModelContext::ModelContext(ModelContext&&) = default;
ModelContext& ModelContext::operator=(ModelContext&&) = default;

void ModelContext::begin_call() {
  scopes_.clear();
  layer_counts_.clear();
  used_.clear();
  moving_average_updates_.clear();
  copies_.clear();
  copied_from_.clear();
}

void apply_moving_average(const MovingAverageUpdate& update) {
  ops::NoGradGuard no_grad;
  Tensor variable = update.variable;
  Tensor value = update.value.to(variable.device());  // averaged on another device
  variable.copy_from(
      ops::add(ops::mul(variable, update.momentum), ops::mul(value, 1.0 - update.momentum)));
}

void ModelContext::update_moving_average(const Tensor& variable, const Tensor& value,
                                         double momentum) {
  Tensor target = variable;
  if (auto original = copied_from_.find(variable.impl()); original != copied_from_.end())
    target = original->second;  // a copy for this call: update the variable it reads
  MovingAverageUpdate update{target, value.detach(), momentum};
  if (defer_moving_averages_)
    moving_average_updates_.push_back(std::move(update));
  else
    apply_moving_average(update);
}

std::vector<MovingAverageUpdate> ContextControl::take_moving_average_updates() {
  return std::exchange(ctx_->moving_average_updates_, {});
}

VariableScope ModelContext::variable_scope(std::string_view name) {
  if (name.empty() || name.find('/') != std::string_view::npos)
    throw InvalidArgumentError(fmt::format(
        "variable_scope: invalid scope name '{}' under '{}'; use a non-empty name without '/' "
        "(nest scopes for deeper names)",
        name, current_scope()));
  scopes_.emplace_back(name);
  return VariableScope(this);
}

void ModelContext::pop_scope() {
  if (!scopes_.empty()) scopes_.pop_back();
}

std::string ModelContext::current_scope() const {
  std::string out;
  for (const std::string& s : scopes_) {
    if (!out.empty()) out += '/';
    out += s;
  }
  return out;
}

std::string ModelContext::full_name(std::string_view relative) const {
  std::string scope = current_scope();
  return scope.empty() ? std::string(relative) : scope + "/" + std::string(relative);
}

std::string ModelContext::layer_name(std::string_view base, std::string_view explicit_name) {
  if (!explicit_name.empty()) {
    if (explicit_name.find('/') != std::string_view::npos)
      throw InvalidArgumentError(fmt::format(
          "layer name '{}' contains '/'; use variable_scope() for nested names", explicit_name));
    return std::string(explicit_name);
  }
  int count = layer_counts_[full_name(base)]++;
  return count == 0 ? std::string(base) : fmt::format("{}_{}", base, count);
}

Tensor ModelContext::get_variable(std::string_view name, const Shape& shape, DType dtype,
                                  const Initializer& initializer, bool trainable) {
  return read_variable(name, shape, dtype, initializer, trainable, nullptr);
}

Tensor ModelContext::get_variable_rows(std::string_view name, const Shape& shape, DType dtype,
                                       const Initializer& initializer, const Tensor& ids,
                                       bool trainable) {
  if (!ids.defined() || (ids.dtype() != DType::kI32 && ids.dtype() != DType::kI64))
    throw InvalidArgumentError(fmt::format(
        "get_variable_rows('{}'): the ids must be an int32 or int64 tensor", full_name(name)));
  return read_variable(name, shape, dtype, initializer, trainable, &ids);
}

Tensor ModelContext::read_variable(std::string_view name, const Shape& shape, DType dtype,
                                   const Initializer& initializer, bool trainable,
                                   const Tensor* rows) {
  if (name.empty()) throw InvalidArgumentError("get_variable: empty variable name");
  std::string full = full_name(name);
  std::optional<Variable> existing = store_->find(full);
  if (shares_store_ && seen_.insert(full).second && existing && initializer)
    initializer(shape, dtype, initializer_generator_);  // keep the stream in step
  if (!existing) {
    if (!initializer)
      throw InvalidArgumentError("get_variable: variable '" + full +
                                 "' does not exist and no initializer was given");
    // A restored value replaces the initial value; drawing one anyway would move the
    // initializer stream past where the checkpoint left it (that draw was made before the save).
    Tensor initial = store_->has_pending_restore(full) && !shares_store_
                         ? Tensor::zeros(shape, dtype)
                         : initializer(shape, dtype, initializer_generator_);
    if (initial.shape() != shape || initial.dtype() != dtype)
      throw InvalidArgumentError(
          fmt::format("get_variable: the initializer of '{}' returned {} {}, expected {} {}", full,
                      dtype_name(initial.dtype()), shape_str(initial.shape()), dtype_name(dtype),
                      shape_str(shape)));
    try {
      store_->create(full, initial, trainable);
    } catch (const AlreadyExistsError&) {
      // Another replica thread created it between find() and create(): use theirs.
    }
    existing = store_->get(full);
    // Inside a training replica step, the strategy may replace the initial value (several
    // workers: the chief's value, so that workers need not share a seed).
    if (is_training() && replica_sync_) {
      ops::NoGradGuard no_grad;
      Tensor value = existing->value;
      replica_sync_->initialize_variable(full, value);
    }
  }
  const Tensor& value = existing->value;
  if (value.shape() != shape || value.dtype() != dtype)
    throw InvalidArgumentError(fmt::format(
        "variable '{}' exists with shape {} and dtype {}, but shape {} and dtype {} was "
        "requested; a layer's input size changed, or two layers share a name (give them "
        "distinct names or scopes)",
        full, shape_str(value.shape()), dtype_name(value.dtype()), shape_str(shape),
        dtype_name(dtype)));
  if (existing->trainable != trainable)
    throw InvalidArgumentError(
        fmt::format("variable '{}' exists as {}trainable but was requested as {}trainable", full,
                    existing->trainable ? "" : "non-", trainable ? "" : "non-"));
  used_.insert(full);
  if (replica_sync_) {  // a cache of variables kept elsewhere: bring what is read up to date
    ops::NoGradGuard no_grad;
    Tensor cached = value;
    replica_sync_->read_variable(full, cached, rows);
  }
  const Device stored = value.device();
  if (stored == device_ || (stored.is_cpu() && device_.is_cpu()) || !is_floating(value.dtype()))
    return value;  // CPU devices share host memory
  // Stored on another device: one copy per call, whose gradient flows back to the variable.
  if (auto copy = copies_.find(full); copy != copies_.end()) return copy->second;
  Tensor copy = ops::copy_to(value, device_);
  copies_.emplace(full, copy);
  copied_from_.emplace(copy.impl(), value);
  return copy;
}

std::vector<Variable> ModelContext::trainable_variables() const {
  std::vector<Variable> out;
  for (Variable& v : store_->trainable_variables())
    if (used_.count(v.name)) out.push_back(std::move(v));
  return out;
}

}  // namespace est::nn
