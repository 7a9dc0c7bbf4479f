// Params and EstimatorContext: what model_fn gets besides its features, as TF's `params` and
// `config` arguments.
//
// model_fn keeps DESIGN.md's signature (ctx is an nn::ModelContext&). The Estimator passes an
// EstimatorContext, a ModelContext that also carries the params, the RunConfig and the mode,
// and model_fn reaches them through est::params(ctx) / est::run_config(ctx), which check that
// ctx really is the Estimator's context of the current call (FailedPreconditionError otherwise).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "estimator/mode_keys.h"
#include "estimator/model_fn_records.h"
#include "estimator/run_config.h"
#include "nn/model_context.h"

namespace est {

using ParamValue = std::variant<bool, int64_t, double, std::string>;

// Hyperparameters by name: `est::Params{{"learning_rate", 0.05}, {"units", int64_t{64}}}`.
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, ParamValue>> values)
      : values_(values) {}

  bool contains(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, ParamValue value) { values_[name] = std::move(value); }
  const std::map<std::string, ParamValue>& values() const { return values_; }

  // NotFoundError naming the parameter when absent; InvalidArgumentError when of another type
  // (an int64 is accepted where a double is asked for).
  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  double get_double(const std::string& name, double fallback) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;

 private:
  std::map<std::string, ParamValue> values_;
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
  // What the current model_fn call recorded (summaries, named tensors); the Estimator clears it
  // before each call and moves it into the returned spec.
  ModelFnRecords& records() { return records_; }

 private:
  ModeKeys mode_keys_;
  ModelFnRecords records_;
  const Params* params_;
  const RunConfig* config_;
};

// Marks `context` as the one model_fn is being called with on this thread (the Estimator
// does this around each call; the guard restores the previous one).
class ActiveContextGuard {
 public:
  explicit ActiveContextGuard(const EstimatorContext& context);
  ~ActiveContextGuard();
  ActiveContextGuard(const ActiveContextGuard&) = delete;
  ActiveContextGuard& operator=(const ActiveContextGuard&) = delete;

 private:
  const EstimatorContext* previous_;
};

// The EstimatorContext behind `ctx` during a model_fn call; FailedPreconditionError when ctx
// is a plain ModelContext (model_fn called outside an Estimator).
const EstimatorContext& estimator_context(const ModelContext& ctx);
inline const Params& params(const ModelContext& ctx) { return estimator_context(ctx).params(); }
inline const RunConfig& run_config(const ModelContext& ctx) {
  return estimator_context(ctx).config();
}

}  // namespace est
