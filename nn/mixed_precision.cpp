// Dtype policies and the layer casts (see mixed_precision.h; Keras's
// keras/mixed_precision/policy.py and autocast_variable.py).
#include "nn/mixed_precision.h"

#include <fmt/format.h>

#include <mutex>

#include "ops/array_ops.h"

namespace est::nn::mixed_precision {
namespace {

std::mutex& policy_mutex() {
  static std::mutex mutex;
  return mutex;
}

Policy& global_slot() {
  static Policy policy("float32");
  return policy;
}

}  // namespace

Policy::Policy(std::string_view name) : name_(name) {
  if (name == "float32") {
    compute_ = variable_ = DType::kF32;
  } else if (name == "float64") {
    compute_ = variable_ = DType::kF64;
  } else if (name == "bfloat16") {
    compute_ = variable_ = DType::kBF16;
  } else if (name == "mixed_bfloat16") {
    compute_ = DType::kBF16;
    variable_ = DType::kF32;
  } else if (name == "mixed_float16" || name == "float16") {
    throw UnimplementedError(fmt::format(
        "mixed_precision.Policy(\"{}\"): float16 is not implemented: it needs loss scaling "
        "(Keras's LossScaleOptimizer), which est does not have; use \"mixed_bfloat16\", whose "
        "float32 exponent range needs none",
        name));
  } else {
    throw InvalidArgumentError(fmt::format(
        "mixed_precision.Policy(\"{}\"): unknown policy; valid policies are \"float32\", "
        "\"float64\", \"bfloat16\" and \"mixed_bfloat16\"",
        name));
  }
}

Policy global_policy() {
  std::lock_guard<std::mutex> lock(policy_mutex());
  return global_slot();
}

void set_global_policy(const Policy& policy) {
  std::lock_guard<std::mutex> lock(policy_mutex());
  global_slot() = policy;
}

void set_global_policy(std::string_view name) { set_global_policy(Policy(name)); }

PolicyScope::PolicyScope(std::string_view name) : previous_(global_policy()) {
  set_global_policy(name);
}

PolicyScope::~PolicyScope() { set_global_policy(previous_); }

LayerDtypes layer_dtypes(std::string_view layer_policy, const Tensor& x) {
  const bool explicit_policy = !layer_policy.empty();
  const Policy policy = explicit_policy ? Policy(layer_policy) : global_policy();
  if (explicit_policy || policy.is_mixed())
    return {.compute = policy.compute_dtype(), .variable = policy.variable_dtype()};
  // A global single-dtype policy: the layer follows its input (tf.compat.v1.layers), a
  // bfloat16 input (from a mixed layer) excepted.
  const DType dtype =
      is_floating(x.dtype()) && x.dtype() != DType::kBF16 ? x.dtype() : policy.compute_dtype();
  return {.compute = dtype, .variable = dtype};
}

Tensor cast_input(const LayerDtypes& dtypes, const Tensor& x) {
  if (!is_floating(x.dtype()) || x.dtype() == dtypes.compute) return x;
  return ops::cast(x, dtypes.compute);
}

Tensor read_variable(const LayerDtypes& dtypes, const Tensor& variable) {
  if (variable.dtype() == dtypes.compute) return variable;
  return ops::cast(variable, dtypes.compute);
}

Tensor to_float32_if_bfloat16(const Tensor& t) {
  return t.defined() && t.dtype() == DType::kBF16 ? ops::cast(t, DType::kF32) : t;
}

}  // namespace est::nn::mixed_precision
