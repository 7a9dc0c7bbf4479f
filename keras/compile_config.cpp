// The compile state as Keras saves it (see serialization.h): Keras 3's compile_config
// (keras/src/trainers/trainer.py get_compile_config; optimizer get_config in
// keras/src/optimizers/base_optimizer.py; losses in keras/src/losses/losses.py) and Keras 2's
// training_config (keras/saving/legacy/saving_utils.py model_metadata, optimizer_v2 configs).
#include <fmt/format.h>

#include <algorithm>

#include "keras/serialization.h"
#include "ops/error.h"

namespace est::keras {
namespace {

struct LossClass {
  const char* name;
  const char* class_name;
};
constexpr LossClass kLossClasses[] = {
    {"sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"},
    {"categorical_crossentropy", "CategoricalCrossentropy"},
    {"binary_crossentropy", "BinaryCrossentropy"},
    {"mean_squared_error", "MeanSquaredError"},
};

Json keras3_object(const std::string& module, const std::string& class_name, Json config) {
  return Json{{"module", module},
              {"class_name", class_name},
              {"config", std::move(config)},
              {"registered_name", nullptr}};
}

double hyper(const Optimizer& optimizer, const char* key) { return optimizer.config.at(key); }

Json optimizer_config(const Optimizer& optimizer, KerasVersion version) {
  Json config;
  const bool k3 = version == KerasVersion::k3;
  config["name"] = k3 ? (optimizer.name == "RMSprop"   ? std::string("rmsprop")
                         : optimizer.name == "SGD"     ? std::string("SGD")
                         : optimizer.name == "Adagrad" ? std::string("adagrad")
                                                       : std::string("adam"))
                      : optimizer.name;
  config["learning_rate"] = hyper(optimizer, "learning_rate");
  if (k3) {
    for (const char* key : {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue"})
      config[key] = nullptr;
    config["use_ema"] = false;
    config["ema_momentum"] = 0.99;
    for (const char* key :
         {"ema_overwrite_frequency", "loss_scale_factor", "gradient_accumulation_steps"})
      config[key] = nullptr;
  } else {
    config["decay"] = 0.0;
  }
  if (optimizer.name == "SGD") {
    config["momentum"] = hyper(optimizer, "momentum");
    config["nesterov"] = hyper(optimizer, "nesterov") != 0;
  } else if (optimizer.name == "Adam") {
    for (const char* key : {"beta_1", "beta_2", "epsilon"}) config[key] = hyper(optimizer, key);
    config["amsgrad"] = false;
  } else if (optimizer.name == "RMSprop") {
    for (const char* key : {"rho", "momentum", "epsilon"}) config[key] = hyper(optimizer, key);
    config["centered"] = hyper(optimizer, "centered") != 0;
  } else if (optimizer.name == "Adagrad") {
    for (const char* key : {"initial_accumulator_value", "epsilon"})
      config[key] = hyper(optimizer, key);
  }
  if (k3) return keras3_object("keras.optimizers", optimizer.name, std::move(config));
  return Json{{"class_name", optimizer.name}, {"config", std::move(config)}};
}

Json loss_config(const Loss& loss, KerasVersion version) {
  std::string class_name;
  for (const auto& known : kLossClasses)
    if (loss.name == known.name) class_name = known.class_name;
  Json config;
  config["name"] = loss.name;
  config["reduction"] = version == KerasVersion::k3 ? "sum_over_batch_size" : "auto";
  if (class_name != "MeanSquaredError") config["from_logits"] = loss.from_logits;
  if (class_name == "SparseCategoricalCrossentropy") config["ignore_class"] = nullptr;
  if (class_name == "BinaryCrossentropy" || class_name == "CategoricalCrossentropy") {
    config["label_smoothing"] = 0.0;
    config["axis"] = -1;
  }
  if (version == KerasVersion::k3) return keras3_object("keras.losses", class_name, config);
  return Json{{"class_name", class_name}, {"config", config}};
}

Json string_or(const Json& config, const char* key, const char* fallback) {
  return config.contains(key) && !config[key].is_null() ? config[key] : Json(fallback);
}

Loss loss_from_config(const Json& config, const std::string& where) {
  if (config.is_string()) return get_loss(config.get<std::string>());
  if (!config.is_object() || !config.contains("class_name"))
    throw DataLossError(fmt::format("{}: the saved loss is neither a name nor a Keras object: {}",
                                    where, config.dump()));
  std::string class_name = config["class_name"].get<std::string>();
  Json inner = config.value("config", Json::object());
  bool from_logits = inner.contains("from_logits") && inner["from_logits"].get<bool>();
  if (class_name == "SparseCategoricalCrossentropy")
    return losses::SparseCategoricalCrossentropy(from_logits);
  if (class_name == "CategoricalCrossentropy") return losses::CategoricalCrossentropy(from_logits);
  if (class_name == "BinaryCrossentropy") return losses::BinaryCrossentropy(from_logits);
  if (class_name == "MeanSquaredError") return losses::MeanSquaredError();
  throw InvalidArgumentError(
      fmt::format("{}: unknown loss class '{}'; est::keras has SparseCategoricalCrossentropy, "
                  "CategoricalCrossentropy, BinaryCrossentropy, MeanSquaredError",
                  where, class_name));
}

Json loss_arg_config(const LossArg& arg, KerasVersion version) {
  if (!arg) return nullptr;
  if (const auto* name = std::get_if<std::string>(&*arg)) return *name;
  return loss_config(std::get<Loss>(*arg), version);
}

// compile's loss as the user gave it (Keras saves the structure: one, a list, a dict).
Json losses_config(const CompileOptions& options, KerasVersion version) {
  if (const auto* name = std::get_if<std::string>(&options.loss)) return *name;
  if (const auto* loss = std::get_if<Loss>(&options.loss)) return loss_config(*loss, version);
  if (const auto* list = std::get_if<LossList>(&options.loss)) {
    Json out = Json::array();
    for (const auto& arg : *list) out.push_back(loss_arg_config(arg, version));
    return out;
  }
  Json out = Json::object();
  for (const auto& [output, arg] : std::get<LossMap>(options.loss))
    out[output] = loss_arg_config(arg, version);
  return out;
}

LossArg loss_arg_from_config(const Json& config, const std::string& where) {
  if (config.is_null()) return std::nullopt;
  if (config.is_string()) return config.get<std::string>();
  return loss_from_config(config, where);
}

Json loss_weights_config(const CompileOptions& options) {
  if (const auto* list = std::get_if<LossWeightList>(&options.loss_weights)) return *list;
  if (const auto* map = std::get_if<LossWeightMap>(&options.loss_weights)) return *map;
  return nullptr;
}

Json metrics_config(const CompileMetrics& metrics) {
  if (metrics.all_names().empty()) return nullptr;
  return std::visit([](const auto& value) { return Json(value); }, metrics.value());
}

std::vector<std::string> metrics_from_config(const Json& config) {
  std::vector<std::string> out;
  if (config.is_string()) out.push_back(config.get<std::string>());
  if (config.is_array())
    for (const Json& entry : config)
      for (auto& name : metrics_from_config(entry)) out.push_back(name);
  if (config.is_object() && config.contains("config") && config["config"].contains("name"))
    out.push_back(config["config"]["name"].get<std::string>());
  return out;
}

// compile's metrics as saved: a list of names (or metric objects) for every output, a list per
// output, or lists keyed by output name.
CompileMetrics metrics_structure(const Json& config) {
  bool nested = config.is_array() && std::any_of(config.begin(), config.end(),
                                                 [](const Json& e) { return e.is_array(); });
  if (nested) {
    MetricLists lists;
    for (const Json& entry : config) lists.push_back(metrics_from_config(entry));
    return lists;
  }
  if (config.is_object() && !config.contains("class_name")) {
    MetricMap map;
    for (const auto& [output, entry] : config.items()) map[output] = metrics_from_config(entry);
    return map;
  }
  return metrics_from_config(config);
}

}  // namespace

Json compile_config(const Model& model, KerasVersion version) {
  const auto& options = model.compile_options();
  if (!options) return nullptr;
  Json out;
  Json loss = losses_config(*options, version);
  Json optimizer =
      std::holds_alternative<std::string>(options->optimizer) && version == KerasVersion::k3
          ? Json(std::get<std::string>(options->optimizer))
          : optimizer_config(*model.optimizer(), version);
  Json metrics = metrics_config(options->metrics);
  Json loss_weights = loss_weights_config(*options);
  if (version == KerasVersion::k3) {
    out["optimizer"] = optimizer;
    out["loss"] = loss;
    out["loss_weights"] = loss_weights;
    out["metrics"] = metrics;
    out["weighted_metrics"] = nullptr;
    out["run_eagerly"] = false;
    out["steps_per_execution"] = 1;
    out["jit_compile"] = false;
    return out;
  }
  out["loss"] = loss;
  out["metrics"] = metrics;
  out["weighted_metrics"] = nullptr;
  out["loss_weights"] = loss_weights;
  out["optimizer_config"] = optimizer;
  return out;
}

Optimizer optimizer_from_config(const Json& config, const std::string& where) {
  if (config.is_string()) return get_optimizer(config.get<std::string>());
  if (!config.is_object() || !config.contains("class_name"))
    throw DataLossError(fmt::format(
        "{}: the saved optimizer is neither a name nor a Keras object: {}", where, config.dump()));
  std::string class_name = config["class_name"].get<std::string>();
  Json inner = config.value("config", Json::object());
  auto number = [&](const char* key, double fallback) {
    if (!inner.contains(key) || inner[key].is_null()) return fallback;
    if (!inner[key].is_number())
      throw UnimplementedError(fmt::format(
          "{}: optimizer {} has a {} that is not a number ({}); learning rate schedules are "
          "not restored from files",
          where, class_name, key, inner[key].dump()));
    return inner[key].get<double>();
  };
  auto flag = [&](const char* key) { return inner.contains(key) && inner[key].get<bool>(); };
  if (class_name == "SGD" || class_name == "sgd")
    return optimizers::SGD({.learning_rate = number("learning_rate", 0.01),
                            .momentum = number("momentum", 0.0),
                            .nesterov = flag("nesterov")});
  if (class_name == "Adam" || class_name == "adam")
    return optimizers::Adam({.learning_rate = number("learning_rate", 0.001),
                             .beta_1 = number("beta_1", 0.9),
                             .beta_2 = number("beta_2", 0.999),
                             .epsilon = number("epsilon", 1e-7)});
  if (class_name == "RMSprop" || class_name == "rmsprop")
    return optimizers::RMSprop({.learning_rate = number("learning_rate", 0.001),
                                .rho = number("rho", 0.9),
                                .momentum = number("momentum", 0.0),
                                .epsilon = number("epsilon", 1e-7),
                                .centered = flag("centered")});
  if (class_name == "Adagrad" || class_name == "adagrad")
    return optimizers::Adagrad(
        {.learning_rate = number("learning_rate", 0.001),
         .initial_accumulator_value = number("initial_accumulator_value", 0.1),
         .epsilon = number("epsilon", 1e-7)});
  throw InvalidArgumentError(
      fmt::format("{}: unknown optimizer class '{}'; est::keras has SGD, Adam, RMSprop, Adagrad",
                  where, class_name));
}

void compile_from_config(Model& model, const Json& config, const std::string& where) {
  if (!config.is_object())
    throw DataLossError(fmt::format("{}: the compile config is not a JSON object", where));
  CompileOptions options;
  const Json& optimizer =
      config.contains("optimizer") ? config["optimizer"] : config.value("optimizer_config", Json());
  if (optimizer.is_string())
    options.optimizer = optimizer.get<std::string>();
  else
    options.optimizer = optimizer_from_config(optimizer, where);
  const Json loss = string_or(config, "loss", "");
  if (loss.is_string()) {
    options.loss = loss.get<std::string>();
  } else if (loss.is_array()) {
    LossList list;
    for (const Json& entry : loss) list.push_back(loss_arg_from_config(entry, where));
    options.loss = std::move(list);
  } else if (loss.is_object() && !loss.contains("class_name")) {  // keyed by output name
    LossMap map;
    for (const auto& [output, entry] : loss.items())
      map[output] = loss_arg_from_config(entry, where);
    options.loss = std::move(map);
  } else {
    options.loss = loss_from_config(loss, where);
  }
  const Json weights = config.value("loss_weights", Json());
  if (weights.is_array())
    options.loss_weights = weights.get<LossWeightList>();
  else if (weights.is_object())
    options.loss_weights = weights.get<LossWeightMap>();
  else if (!weights.is_null())
    throw DataLossError(
        fmt::format("{}: loss_weights is neither a list nor a map: {}", where, weights.dump()));
  if (config.contains("metrics")) options.metrics = metrics_structure(config["metrics"]);
  model.compile(std::move(options));
}

}  // namespace est::keras
