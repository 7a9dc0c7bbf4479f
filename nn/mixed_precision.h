// Mixed precision: Keras's dtype policies (tf.keras.mixed_precision.Policy, set_global_policy,
// global_policy), after keras/mixed_precision/policy.py, and the casts layers make under them,
// after keras/mixed_precision/autocast_variable.py (AutoCastVariable: a float32 variable read
// as the compute dtype inside a layer).
//
// A policy has a compute dtype (what a layer's ops run in) and a variable dtype (what its
// variables are stored and updated in). "mixed_bfloat16" computes in bfloat16 and keeps
// float32 variables: the checkpoint holds float32 master weights, a layer reads each variable
// through a cast to bfloat16 (the gradient flows back through the cast, so the optimizer
// updates float32), and floating inputs are cast to bfloat16. bfloat16 has float32's exponent
// range, so no loss scaling is needed; "mixed_float16" would need it (Keras's
// LossScaleOptimizer) and is an UnimplementedError. Where the precision matters the work stays
// in float32, as Keras does: batch normalization computes its statistics in float32 (its
// variables are float32, its output is cast back), softmax as an activation and the losses
// (nn/losses.h) cast bfloat16 up to float32, and metrics receive float32 losses.
//
// The default global policy is "float32". est's layers are tf.compat.v1.layers, whose dtype
// follows their input (Keras's "_infer" policy for TF1 code), so under a global single-dtype
// policy a layer still computes in its input's dtype (a float64 model stays float64); only a
// bfloat16 input is cast to the policy's dtype. A policy given to one layer (its `.dtype`
// option, "float32" for Keras's recommended float32 output layer) applies as Keras applies it:
// floating inputs cast to its compute dtype, variables in its variable dtype.
//
// The global policy is process-wide, as Keras's: set it before training starts (replica
// threads read it on every layer call).
#pragma once

#include <string>
#include <string_view>

#include "ops/tensor.h"

namespace est::nn::mixed_precision {

class Policy {
 public:
  // "float32", "float64", "bfloat16" (single-dtype policies) or "mixed_bfloat16".
  // "mixed_float16" (and "float16") is an UnimplementedError: float16 needs loss scaling,
  // which est does not implement; any other name is an InvalidArgumentError listing these.
  explicit Policy(std::string_view name);

  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  bool is_mixed() const { return compute_ != variable_; }
  bool operator==(const Policy& other) const { return name_ == other.name_; }

 private:
  std::string name_;
  DType compute_ = DType::kF32;
  DType variable_ = DType::kF32;
};

// The policy layers use unless given their own: Policy("float32") until set.
Policy global_policy();
void set_global_policy(const Policy& policy);
void set_global_policy(std::string_view name);

// Sets the global policy for its lifetime and restores the previous one (Keras's
// policy_scope).
class PolicyScope {
 public:
  explicit PolicyScope(std::string_view name);
  ~PolicyScope();
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  Policy previous_;
};

// What one layer call computes in and stores its variables in.
struct LayerDtypes {
  DType compute = DType::kF32;
  DType variable = DType::kF32;
  bool is_mixed() const { return compute != variable; }
};

// The dtypes of a layer whose `.dtype` option is `layer_policy` (empty: the global policy)
// called on `x`, following the rules in the header comment.
LayerDtypes layer_dtypes(std::string_view layer_policy, const Tensor& x);

// `x` in the compute dtype when it is floating (integer inputs pass unchanged).
Tensor cast_input(const LayerDtypes& dtypes, const Tensor& x);

// A variable as the layer reads it: cast to the compute dtype when that differs (Keras's
// AutoCastVariable); the cast's gradient reaches the variable in its own dtype.
Tensor read_variable(const LayerDtypes& dtypes, const Tensor& variable);

// `t` in float32 when it is bfloat16, else unchanged: where work stays in float32 (losses,
// softmax, batch normalization's statistics).
Tensor to_float32_if_bfloat16(const Tensor& t);

}  // namespace est::nn::mixed_precision
