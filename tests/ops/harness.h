// The op-consistency harness (in the manner of ggml's test-backend-ops): each op is one
// OpCase. The runner (harness_test.cpp) executes every case
//   1. on every (device, backend) target of the kernel registry (cpu/onednn under a
//      BackendGuard, gpu/cuda with the inputs copied to /gpu:0) in float32, against the Eigen
//      reference (forward),
//   2. on the reference in float64, against central finite differences (gradients),
//   3. on every target in float32, against the reference's gradients (backward kernels).
// A target this machine cannot run is reported as skipped. Adding an op means adding a case in
// one of the op_cases_*.cpp files; adding a backend means registering its kernels.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace est::testing {

struct OpCase {
  std::string name;  // "conv2d/same/stride2", shown on failure
  // Builds the inputs in the given floating dtype. Integer inputs (labels, indices) keep their
  // own dtype. Called with the same seed for every backend, so inputs are identical.
  std::function<std::vector<ops::Tensor>(ops::DType, ops::Generator&)> make_inputs;
  // Runs the op under test.
  std::function<ops::Tensor(const std::vector<ops::Tensor>&)> run;
  // Inputs whose gradient is checked (empty: the op has no gradient).
  std::vector<int> differentiable;
  double forward_tolerance = 1e-4;   // float32 backend vs reference, relative to max |ref|
  double gradient_tolerance = 1e-5;  // float64 analytic vs finite differences (relative)
  double finite_difference_step = 1e-6;
  // Whether the op has bfloat16 kernels (the bfloat16 pass of harness_test runs the case).
  // The fused optimizer updates do not: bfloat16 variables take the composite path, and
  // mixed_bfloat16 keeps float32 variables.
  bool bfloat16 = true;
};

// An input maker: one uniform tensor in [low, high) per shape, in the case's dtype.
inline auto uniform_inputs(std::vector<ops::Shape> shapes, double low = -1.0, double high = 1.0) {
  return [shapes = std::move(shapes), low, high](ops::DType dtype, ops::Generator& generator) {
    std::vector<ops::Tensor> inputs;
    for (const ops::Shape& shape : shapes)
      inputs.push_back(ops::random_uniform(shape, low, high, generator, dtype));
    return inputs;
  };
}

// Adds a case to the global list; use through a static initializer in the case files.
int register_op_case(OpCase op_case);
const std::vector<OpCase>& op_cases();

}  // namespace est::testing

#define EST_OP_CASE_CONCAT_(a, b) a##b
#define EST_OP_CASE_NAME_(line) EST_OP_CASE_CONCAT_(est_op_case_, line)
// EST_OP_CASE({.name = ..., .make_inputs = ..., .run = ..., .differentiable = {0}});
#define EST_OP_CASE(...) \
  static const int EST_OP_CASE_NAME_(__LINE__) = ::est::testing::register_op_case(__VA_ARGS__)
