// The optimizer's state between Keras's files and est's checkpoints (see optimizer_state.h).
#include "keras/optimizer_state.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/error.h"

namespace est::keras {
namespace {

// Keras 3's slot kinds of an optimizer, in the order its build() creates them, and whether
// they go variable by variable (Adam) or kind by kind (RMSprop).
std::vector<std::string> slot_kinds(const Optimizer& optimizer) {
  auto config = [&](const char* key) {
    auto it = optimizer.config.find(key);
    return it == optimizer.config.end() ? 0.0 : it->second;
  };
  if (optimizer.name == "Adam") return {"momentum", "velocity"};
  if (optimizer.name == "SGD")
    return config("momentum") != 0 ? std::vector<std::string>{"momentum"}
                                   : std::vector<std::string>{};
  if (optimizer.name == "RMSprop") {
    std::vector<std::string> kinds{"velocity"};
    if (config("momentum") != 0) kinds.push_back("momentum");
    if (config("centered") != 0) kinds.push_back("average_gradient");
    return kinds;
  }
  if (optimizer.name == "Adagrad") return {"accumulator"};
  throw UnimplementedError(
      fmt::format("saving: the state of optimizer {} is not supported", optimizer.name));
}

// est's slot name for a Keras slot kind (TF1's names; nn/adam.cpp, momentum.cpp, rmsprop.cpp).
std::string est_slot(const Optimizer& optimizer, const std::string& variable,
                     const std::string& kind) {
  bool centered = optimizer.config.count("centered") && optimizer.config.at("centered") != 0;
  std::string suffix;
  if (optimizer.name == "Adam") suffix = kind == "momentum" ? "Adam" : "Adam_1";
  if (optimizer.name == "SGD") suffix = "Momentum";
  if (optimizer.name == "Adagrad") suffix = "Adagrad";
  if (optimizer.name == "RMSprop") {
    if (kind == "velocity") suffix = "RMSProp";
    if (kind == "average_gradient") suffix = "RMSProp_1";
    if (kind == "momentum") suffix = centered ? "RMSProp_2" : "RMSProp_1";
  }
  return variable + "/" + suffix;
}

// Keras 2's short slot names (optimizer_v2).
std::string keras2_kind(const Optimizer& optimizer, const std::string& kind) {
  if (optimizer.name == "Adam") return kind == "momentum" ? "m" : "v";
  if (optimizer.name == "RMSprop") {
    if (kind == "velocity") return "rms";
    if (kind == "average_gradient") return "mg";
  }
  return kind;
}

std::string underscored(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    out.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) return out;
    start = slash + 1;
  }
}

std::string normal_kind(const std::string& kind) {
  if (kind == "m") return "momentum";
  if (kind == "v" || kind == "rms") return "velocity";
  if (kind == "mg") return "average_gradient";
  return kind;
}

}  // namespace

std::vector<OptimizerVariable> keras3_optimizer_variables(const Optimizer& optimizer,
                                                          const TrainableWeights& trainable) {
  std::string prefix = optimizer.name == "RMSprop"   ? "rmsprop"
                       : optimizer.name == "SGD"     ? "sgd"
                       : optimizer.name == "Adagrad" ? "adagrad"
                                                     : "adam";
  std::vector<OptimizerVariable> out{{prefix + "/iteration", "iterations", ""},
                                     {prefix + "/learning_rate", "learning_rate", ""}};
  std::vector<std::string> kinds = slot_kinds(optimizer);
  auto add = [&](const std::string& variable, const std::string& kind) {
    out.push_back({prefix + "/" + underscored(variable) + "_" + kind, kind, variable});
  };
  if (optimizer.name == "Adam") {
    for (const auto& [variable, shape] : trainable)
      for (const auto& kind : kinds) add(variable, kind);
  } else {
    for (const auto& kind : kinds)
      for (const auto& [variable, shape] : trainable) add(variable, kind);
  }
  return out;
}

std::vector<OptimizerVariable> keras2_optimizer_variables(const Optimizer& optimizer,
                                                          const TrainableWeights& trainable) {
  std::vector<OptimizerVariable> out{{optimizer.name + "/iter:0", "iterations", ""}};
  for (const auto& kind : slot_kinds(optimizer))
    for (const auto& [variable, shape] : trainable)
      out.push_back(
          {fmt::format("{}/{}/{}:0", optimizer.name, variable, keras2_kind(optimizer, kind)), kind,
           variable});
  return out;
}

std::vector<ops::Tensor> optimizer_values(const std::vector<OptimizerVariable>& variables,
                                          const Optimizer& optimizer,
                                          const TrainableWeights& trainable,
                                          const checkpoint::TensorBundle& state) {
  std::vector<ops::Tensor> out;
  for (const auto& variable : variables) {
    if (variable.kind == "iterations") {
      out.push_back(
          ops::Tensor::full({}, static_cast<double>(state.global_step), ops::DType::kI64));
    } else if (variable.kind == "learning_rate") {
      out.push_back(ops::Tensor::full({}, optimizer.config.at("learning_rate"), ops::DType::kF32));
    } else if (const auto* entry =
                   state.find(est_slot(optimizer, variable.variable, variable.kind))) {
      out.push_back(entry->value);
    } else {
      auto it = std::find_if(trainable.begin(), trainable.end(),
                             [&](const auto& weight) { return weight.first == variable.variable; });
      // Not created yet: its initial value (Adagrad's accumulator starts above zero).
      double initial =
          variable.kind == "accumulator" ? optimizer.config.at("initial_accumulator_value") : 0.0;
      out.push_back(ops::Tensor::full(it->second, initial, ops::DType::kF32));
    }
  }
  return out;
}

std::vector<OptimizerVariable> parse_optimizer_variables(const std::vector<std::string>& names,
                                                         const TrainableWeights& trainable,
                                                         const std::string& where) {
  // Longest model variable names first, so that "my_dense/kernel" wins over "dense/kernel".
  std::vector<std::string> candidates;
  for (const auto& weight : trainable) candidates.push_back(weight.first);
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::vector<OptimizerVariable> out;
  for (const std::string& stored : names) {
    std::string name = stored.ends_with(":0") ? stored.substr(0, stored.size() - 2) : stored;
    std::vector<std::string> parts = split(name);
    const std::string& last = parts.back();
    if (last == "iter" || last == "iteration" || last == "iterations") {
      out.push_back({stored, "iterations", ""});
      continue;
    }
    if (parts.size() <= 2 && (last == "learning_rate" || last == "lr" || last == "decay" ||
                              last == "beta_1" || last == "beta_2" || last == "rho")) {
      out.push_back({stored, "learning_rate", ""});
      continue;
    }
    std::optional<OptimizerVariable> found;
    for (const std::string& variable : candidates) {
      std::string rest = name.substr(name.find('/') + 1);  // without the optimizer's name
      if (rest.starts_with(variable + "/") && split(rest.substr(variable.size() + 1)).size() == 1)
        found = OptimizerVariable{stored, normal_kind(rest.substr(variable.size() + 1)), variable};
      else if (parts.size() > 2 && rest.ends_with("/" + variable) &&
               rest.size() == parts[1].size() + 1 + variable.size())
        found = OptimizerVariable{stored, normal_kind(parts[1]), variable};
      for (const char* kind : {"momentum", "velocity", "average_gradient", "accumulator"}) {
        std::string tail = underscored(variable) + "_" + kind;
        if (!found && (rest == tail || rest.ends_with("_" + tail)))
          found = OptimizerVariable{stored, kind, variable};
      }
      if (found) break;
    }
    if (!found)
      throw InvalidArgumentError(fmt::format(
          "{}: optimizer weight \"{}\" belongs to none of the model's trainable weights; the "
          "file was saved from another model",
          where, stored));
    out.push_back(*found);
  }
  return out;
}

void apply_optimizer_values(const std::vector<OptimizerVariable>& variables,
                            const std::vector<ops::Tensor>& values, const Optimizer& optimizer,
                            checkpoint::TensorBundle& state) {
  for (size_t i = 0; i < variables.size(); ++i) {
    const OptimizerVariable& variable = variables[i];
    if (variable.kind == "iterations") {
      state.global_step = static_cast<int64_t>(values[i].item());
      if (auto* step = state.find("global_step"))
        step->value =
            ops::Tensor::full({}, static_cast<double>(state.global_step), ops::DType::kI64);
      else
        state.add_variable(
            "global_step",
            ops::Tensor::full({}, static_cast<double>(state.global_step), ops::DType::kI64), false);
      continue;
    }
    if (variable.kind == "learning_rate") continue;
    std::string name = est_slot(optimizer, variable.variable, variable.kind);
    ops::Tensor value = ops::cast(values[i], ops::DType::kF32);
    if (auto* entry = state.find(name))
      entry->value = value;
    else
      state.add_slot(name, value);
  }
  if (optimizer.name == "Adam") {  // TF1 Adam's beta powers after global_step updates
    for (const char* beta : {"beta_1", "beta_2"}) {
      double factor = optimizer.config.at(beta);
      float power = static_cast<float>(factor);
      for (int64_t step = 0; step < state.global_step; ++step)
        power = static_cast<float>(static_cast<double>(power) * factor);
      std::string name = beta == std::string("beta_1") ? "beta1_power" : "beta2_power";
      ops::Tensor value = ops::Tensor::full({}, power, ops::DType::kF32);
      if (auto* entry = state.find(name))
        entry->value = value;
      else
        state.add_variable(name, value, false);
    }
  }
}

}  // namespace est::keras
