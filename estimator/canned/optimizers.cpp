// get_optimizer_instance and the per-scope optimizer of the wide & deep estimators
// (tensorflow/estimator canned/optimizers.py, dnn_linear_combined.py).
#include "estimator/canned/optimizers.h"

#include <fmt/format.h>

#include <memory>

#include "ops/autograd.h"

namespace est::canned {
namespace {

// Applies each part's optimizer to the variables under its scope. The outer Optimizer that
// holds this rule counts the step once: each part makes its update alone (Optimizer::update),
// at the step being taken, as TF's grouped train ops do before the single assign_add.
class PerScopeRule final : public optim::UpdateRule {
 public:
  explicit PerScopeRule(std::vector<std::pair<std::string, optim::Optimizer>> parts)
      : parts_(std::move(parts)) {}
  std::string_view name() const override { return "PerScopeOptimizer"; }

  void apply(nn::VariableStore& store, const std::vector<nn::GradAndVar>& grads,
             double /*learning_rate*/) const override {
    std::vector<std::vector<nn::GradAndVar>> split(parts_.size());
    for (const nn::GradAndVar& entry : grads) split[find_part(entry.name)].push_back(entry);
    const int64_t step = nn::read_global_step(store);
    for (size_t i = 0; i < parts_.size(); ++i)
      if (!split[i].empty()) parts_[i].second.update(store, std::move(split[i]), step);
  }

 private:
  size_t find_part(const std::string& variable) const {
    for (size_t i = 0; i < parts_.size(); ++i) {
      const std::string& scope = parts_[i].first;
      if (variable.size() > scope.size() && variable.compare(0, scope.size(), scope) == 0 &&
          variable[scope.size()] == '/')
        return i;
    }
    std::string scopes;
    for (const auto& part : parts_) scopes += (scopes.empty() ? "'" : ", '") + part.first + "'";
    throw InvalidArgumentError(fmt::format(
        "per-scope optimizer: trainable variable '{}' lies under none of the scopes {}; create "
        "the model's variables under one of them",
        variable, scopes));
  }

  std::vector<std::pair<std::string, optim::Optimizer>> parts_;
};

}  // namespace

optim::Optimizer get_optimizer_instance(const OptimizerArg& optimizer, double learning_rate) {
  if (const auto* given = std::get_if<optim::Optimizer>(&optimizer)) return *given;
  const std::string& name = std::get<std::string>(optimizer);
  if (name == "Adagrad") return optim::adagrad(learning_rate);
  if (name == "Adam") return optim::adam(learning_rate);
  if (name == "Ftrl") return optim::ftrl(learning_rate);
  if (name == "RMSProp") return optim::rmsprop(learning_rate);
  if (name == "SGD") return optim::sgd(learning_rate);
  throw InvalidArgumentError(fmt::format(
      "Unsupported optimizer name: '{}'. Supported names are: 'Adagrad', 'Adam', 'Ftrl', "
      "'RMSProp', 'SGD' (or pass an optim:: optimizer)",
      name));
}

optim::Optimizer per_scope_optimizer(std::vector<std::pair<std::string, optim::Optimizer>> parts) {
  if (parts.empty())
    throw InvalidArgumentError("per_scope_optimizer: give at least one (scope, optimizer) part");
  for (const auto& part : parts)
    if (part.first.empty())
      throw InvalidArgumentError("per_scope_optimizer: a scope name is empty");
  return optim::Optimizer(std::make_shared<PerScopeRule>(std::move(parts)), 0.0);
}

}  // namespace est::canned
