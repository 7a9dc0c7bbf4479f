// Params and EstimatorContext: what model_fn gets besides its features, as TF's `params` and
// `config` arguments.
//
// model_fn keeps DESIGN.md's signature (ctx is an nn::ModelContext&). The Estimator passes an
// EstimatorContext, a ModelContext that also carries the params, the RunConfig and the mode,
// and model_fn reaches them through est::params(ctx) / est::run_config(ctx), which check that
// ctx really is an Estimator's context and that model_fn is being called with it (a ModelFnCall
// marks the context itself for the call: FailedPreconditionError otherwise).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "estimator/mode_keys.h"
#include "estimator/model_fn_records.h"
#include "estimator/run_config.h"
#include "feature_column/column.h"
#include "nn/model_context.h"

namespace est {

using FeatureColumns = std::vector<feature_column::ColumnPtr>;

class Params;

// What a parameter holds, as the values of TF's `params` dict: a bool, an integer (int64), a
// float (double), a string, a list of integers, floats or strings (`hidden_units = {10, 10}`),
// feature columns, or nested Params. Built implicitly from each of them:
//   est::Params{{"hidden_units", {10, 10}}, {"learning_rate", 0.05}, {"optimizer", "Adagrad"},
//               {"feature_columns", est::FeatureColumns{numeric_column("x")}},
//               {"optimizer_args", est::Params{{"initial_accumulator_value", 0.1}}}}
class ParamValue {
 public:
  using Variant =
      std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                   std::vector<std::string>, FeatureColumns, std::shared_ptr<const Params>>;

  ParamValue(bool value) : value_(value) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) ParamValue(T value) : value_(static_cast<int64_t>(value)) {}
  template <std::floating_point T>
  ParamValue(T value) : value_(static_cast<double>(value)) {}
  ParamValue(const char* value) : value_(std::string(value)) {}
  ParamValue(std::string value) : value_(std::move(value)) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) ParamValue(std::initializer_list<T> values)
      : value_(std::vector<int64_t>(values.begin(), values.end())) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) ParamValue(const std::vector<T>& values)
      : value_(std::vector<int64_t>(values.begin(), values.end())) {}
  template <std::floating_point T>
  ParamValue(std::initializer_list<T> values)
      : value_(std::vector<double>(values.begin(), values.end())) {}
  template <std::floating_point T>
  ParamValue(const std::vector<T>& values)
      : value_(std::vector<double>(values.begin(), values.end())) {}
  ParamValue(std::initializer_list<const char*> values)
      : value_(std::vector<std::string>(values.begin(), values.end())) {}
  ParamValue(std::vector<std::string> values) : value_(std::move(values)) {}
  ParamValue(FeatureColumns columns) : value_(std::move(columns)) {}
  template <class Column>
  requires std::derived_from<Column, feature_column::FeatureColumn> ParamValue(
      const std::vector<std::shared_ptr<const Column>>& columns)
      : value_(FeatureColumns(columns.begin(), columns.end())) {}
  ParamValue(const Params& nested);

  const Variant& variant() const { return value_; }
  // "int64", "list of double", "feature columns", "params", ...
  std::string type_name() const;

 private:
  friend class Params;
  Variant value_;
};

// Hyperparameters by name, as TF's `params` dict (see ParamValue for what they hold).
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, ParamValue>> values);

  bool contains(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, ParamValue value);
  const std::map<std::string, ParamValue>& values() const { return values_; }

  // NotFoundError naming the parameter (with its path inside nested Params) and the ones given
  // when absent; InvalidArgumentError naming it, the type found and the type asked for when of
  // another type. Integers are accepted where floats are asked for (single or lists).
  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  std::vector<int64_t> get_int_list(const std::string& name) const;
  std::vector<double> get_double_list(const std::string& name) const;
  std::vector<std::string> get_string_list(const std::string& name) const;
  const FeatureColumns& get_feature_columns(const std::string& name) const;
  // The feature columns as dense columns, for input_layer: InvalidArgumentError naming a column
  // that is not dense (wrap categorical columns in indicator_column or embedding_column).
  std::vector<feature_column::DenseColumnPtr> get_dense_columns(const std::string& name) const;
  const Params& get_params(const std::string& name) const;
  // With a fallback when absent (a value of another type is still an error).
  bool get_bool(const std::string& name, bool fallback) const;
  double get_double(const std::string& name, double fallback) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> get_int_list(const std::string& name,
                                    const std::vector<int64_t>& fallback) const;

  // Where these Params sit inside the outer ones ("optimizer/"; empty at the top), for errors.
  const std::string& path() const { return path_; }

 private:
  const ParamValue& lookup(const std::string& name) const;
  template <class T>
  const T& typed(const std::string& name, const char* wanted) const;
  // Copies nested Params so that each knows its path (for its error messages).
  void adopt(const std::string& name, ParamValue& value) const;

  std::map<std::string, ParamValue> values_;
  std::string path_;
};

class EstimatorContext : public nn::ModelContext {
 public:
  EstimatorContext(nn::VariableStore& store, ModeKeys mode, uint64_t seed, const Params& params,
                   const RunConfig& config)
      : nn::ModelContext(store, to_nn_mode(mode), seed),
        mode_keys_(mode),
        params_(&params),
        config_(&config) {}

  const Params& params() const { return *params_; }
  const RunConfig& config() const { return *config_; }
  ModeKeys mode_keys() const { return mode_keys_; }
  // Whether model_fn is being called with this context now (set by ModelFnCall).
  bool in_model_fn() const { return in_model_fn_; }
  void set_in_model_fn(bool in_call) { in_model_fn_ = in_call; }
  // What the current model_fn call recorded (summaries, named tensors); the Estimator clears it
  // before each call and moves it into the returned spec.
  ModelFnRecords& records() { return records_; }

 private:
  ModeKeys mode_keys_;
  ModelFnRecords records_;
  const Params* params_;
  const RunConfig* config_;
  bool in_model_fn_ = false;
};

// Marks `context` as the one model_fn is being called with, for the guard's lifetime (the
// Estimator makes one around each call; it restores the previous mark).
class ModelFnCall {
 public:
  explicit ModelFnCall(EstimatorContext& context)
      : context_(context), previous_(context.in_model_fn()) {
    context_.set_in_model_fn(true);
  }
  ~ModelFnCall() { context_.set_in_model_fn(previous_); }
  ModelFnCall(const ModelFnCall&) = delete;
  ModelFnCall& operator=(const ModelFnCall&) = delete;

 private:
  EstimatorContext& context_;
  bool previous_;
};

// The EstimatorContext behind `ctx` during a model_fn call; FailedPreconditionError when ctx
// is a plain ModelContext (model_fn called outside an Estimator) or an Estimator's context
// that no model_fn call is using (kept from an earlier call).
const EstimatorContext& estimator_context(const ModelContext& ctx);
inline const Params& params(const ModelContext& ctx) { return estimator_context(ctx).params(); }
inline const RunConfig& run_config(const ModelContext& ctx) {
  return estimator_context(ctx).config();
}

}  // namespace est
