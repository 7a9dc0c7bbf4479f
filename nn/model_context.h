// ModelContext: what a model_fn call uses to create and find its variables.
//
// The Estimator makes one context per model_fn call (or keeps one and calls begin_call()
// before each): it refers to the VariableStore that lives across steps, knows the mode, keeps
// the variable-scope stack and the per-call layer counters, and owns the seeded generators.
// Layer calls are numbered afresh within each call (`dense`, `dense_1`, ...), so running the
// same code again finds the same variables, as tf.compat.v1 layers do under a reused scope.
//
// What only distribution strategies set on a context (its device, deferred moving averages,
// the replica a step computes for) is ContextControl's, in the internal context_control.h.
//
// A context computes on one device (its replica's: "/gpu:0"), by default its store's. When
// the two differ (CentralStorageStrategy: variables on the CPU, compute on a GPU) get_variable
// returns a copy of the variable on the compute device, made once per call with ops::copy_to,
// whose gradient flows back to the variable on its own device (TF reads a central variable
// onto each compute device the same way); update_moving_average on such a copy updates the
// variable itself.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "nn/initializers.h"
#include "nn/variable_store.h"
#include "ops/random.h"

namespace est::nn {

enum class Mode : uint8_t { kTrain, kEval, kPredict };

class ContextControl;
class CrossReplicaSync;
class ModelContext;
struct MovingAverageUpdate;

// RAII guard returned by ModelContext::variable_scope(): pops the scope when it goes away.
class VariableScope {
 public:
  VariableScope(VariableScope&& other) noexcept : context_(other.context_) {
    other.context_ = nullptr;
  }
  VariableScope(const VariableScope&) = delete;
  VariableScope& operator=(const VariableScope&) = delete;
  VariableScope& operator=(VariableScope&&) = delete;
  ~VariableScope();

 private:
  friend class ModelContext;
  explicit VariableScope(ModelContext* context) : context_(context) {}
  ModelContext* context_;
};

class ModelContext {
 public:
  // `seed` is the run's seed (RunConfig::tf_random_seed): initializers draw from one generator
  // seeded with it, dropout and other random ops from a second one derived from it.
  explicit ModelContext(VariableStore& store, Mode mode = Mode::kTrain, uint64_t seed = 0);
  // Virtual: the Estimator's EstimatorContext derives from it and is owned (and deleted) as a
  // ModelContext by the strategies' replicas. Defined out of line, where MovingAverageUpdate is
  // complete (context_control.h).
  virtual ~ModelContext();
  ModelContext(const ModelContext&);
  ModelContext& operator=(const ModelContext&);
  ModelContext(ModelContext&&);
  ModelContext& operator=(ModelContext&&);

  VariableStore& store() { return *store_; }
  const VariableStore& store() const { return *store_; }
  Mode mode() const { return mode_; }
  void set_mode(Mode mode) { mode_ = mode; }
  bool is_training() const { return mode_ == Mode::kTrain; }

  // Where this context's computation runs: input batches are copied there, and get_variable
  // returns tensors there. Defaults to the store's device (a strategy sets its replica's).
  Device device() const { return device_; }

  // Called before each model_fn call: resets the layer counters, the scope stack and the list
  // of variables used by this call.
  void begin_call();

  // Pushes a scope: variables created while the guard lives are named "<scope>/...".
  // Usage: `auto scope = ctx.variable_scope("block1");`. The name must be non-empty and
  // contain no '/' (nest guards instead).
  [[nodiscard]] VariableScope variable_scope(std::string_view name);
  // "block1/block2" (empty at the top level).
  std::string current_scope() const;

  // A layer's name within the current scope: `base` for its first call under this scope in
  // this model_fn call, then `base_1`, `base_2`, ... When `explicit_name` is given it is used
  // as is, so two layers given the same name share their variables. The name is relative to
  // the scope ("dense_1"), ready for get_variable("dense_1/kernel", ...).
  std::string layer_name(std::string_view base, std::string_view explicit_name = {});

  // Like tf.compat.v1.get_variable: `name` is relative to the current scope (a layer passes
  // "dense/kernel"). Creates the variable with `initializer` on first use and returns the
  // existing one afterwards (on device(): the variable itself, or its copy for this call when
  // the store lives elsewhere); an existing variable with another shape or dtype is an
  // InvalidArgumentError naming it and both shapes.
  Tensor get_variable(std::string_view name, const Shape& shape, DType dtype,
                      const Initializer& initializer, bool trainable = true);

  // get_variable for a caller that reads only the rows `ids` names along axis 0 (integer ids
  // of any shape; negative ones are skipped, as safe_embedding_lookup_sparse skips them),
  // through ops::gather: an embedding lookup. Inside a replica step whose strategy keeps the
  // variables elsewhere (parameter servers), only those rows of the returned tensor are brought
  // up to date (TF's embedding_lookup gathers on the ps task), so read nothing else of it;
  // elsewhere it is get_variable.
  Tensor get_variable_rows(std::string_view name, const Shape& shape, DType dtype,
                           const Initializer& initializer, const Tensor& ids,
                           bool trainable = true);

  // The trainable variables this call has used (through get_variable), in store order: what
  // minimize() differentiates.
  std::vector<Variable> trainable_variables() const;

  // Moving averages (batch normalization's moving statistics). By default the update is
  // applied at once, in place. A strategy with several replicas defers them instead
  // (context_control.h): the updates of this call are kept until the step takes them, so that
  // their values can be averaged over replicas first and the copies stay identical (TF's MEAN
  // aggregation of a moving-average variable).
  void update_moving_average(const Tensor& variable, const Tensor& value, double momentum);

  // The generator for dropout and other random ops in the model.
  ops::Generator& generator() { return generator_; }
  // The generator initializers draw from.
  ops::Generator& initializer_generator() { return initializer_generator_; }

  // The global step (created at 0 when missing) and its variable.
  int64_t global_step() const { return read_global_step(*store_); }
  Tensor global_step_variable() const { return get_or_create_global_step(*store_); }

 private:
  friend class VariableScope;
  friend class ContextControl;  // the strategies' settings (context_control.h)
  void pop_scope();
  std::string full_name(std::string_view relative) const;
  // get_variable (`rows` null) and get_variable_rows.
  Tensor read_variable(std::string_view name, const Shape& shape, DType dtype,
                       const Initializer& initializer, bool trainable, const Tensor* rows);

  VariableStore* store_;
  Device device_;
  Mode mode_;
  std::vector<std::string> scopes_;
  std::map<std::string, int, std::less<>> layer_counts_;  // full base name -> calls so far
  std::unordered_set<std::string> used_;                  // variables this call touched
  ops::Generator initializer_generator_;
  ops::Generator generator_;
  bool defer_moving_averages_ = false;
  bool shares_store_ = false;
  CrossReplicaSync* replica_sync_ = nullptr;
  std::unordered_set<std::string> seen_;  // variables met so far (only when shares_store_)
  std::vector<MovingAverageUpdate> moving_average_updates_;
  // This call's copies on device_ of variables stored elsewhere: by variable name, and the
  // variable each copy reads (by the copy's tensor), for update_moving_average.
  std::map<std::string, Tensor, std::less<>> copies_;
  std::map<const void*, Tensor> copied_from_;
};

}  // namespace est::nn

namespace est {
using nn::ModelContext;
}  // namespace est
