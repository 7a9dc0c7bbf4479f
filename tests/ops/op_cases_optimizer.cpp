// Harness cases for the fused optimizer updates (OpId::kApplySgd ... kApplyRmsprop): two
// variables per step, one of three CUDA chunks (optimizer_launch.h's kFusedChunk) and one small,
// so the GPU's multi-tensor launch is compared against the reference on every rule. The output
// is every updated variable and slot, flattened and concatenated on the host.
#include "ops/registry.h"
#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::DType;
using ops::Generator;
using ops::OpId;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

const std::vector<Shape> kVariableShapes{{40000}, {3, 5}};

struct Range {
  double low, high;
};

// Per list (variables, gradients, slots...), one tensor per variable shape.
auto lists_of(std::vector<Range> ranges) {
  return [ranges](DType dtype, Generator& generator) {
    Inputs inputs;
    for (const Range& r : ranges)
      for (const Shape& s : kVariableShapes)
        inputs.push_back(ops::random_uniform(s, r.low, r.high, generator, dtype));
    return inputs;
  };
}

// List `list` of the inputs, cloned (the kernels update in place).
std::vector<Tensor> list(const Inputs& inputs, size_t index) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < kVariableShapes.size(); ++i)
    out.push_back(inputs[index * kVariableShapes.size() + i].clone());
  return out;
}

Tensor flatten_all(std::initializer_list<const std::vector<Tensor>*> lists) {
  std::vector<Tensor> flat;
  for (const std::vector<Tensor>* l : lists)
    for (const Tensor& t : *l) flat.push_back(ops::reshape(t.to(ops::Device::cpu()), {-1}));
  return ops::concat(flat, 0);
}

template <OpId id, class... Args>
void run_op(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients, Args&&... args) {
  const Tensor& first = variables.front();
  ops::run_kernel<id>(ops::op_info(id).name.data(), first.device(), first.dtype(), variables,
                      gradients, std::forward<Args>(args)...);
}

constexpr Range kSigned{-1.0, 1.0};
constexpr Range kPositive{0.1, 1.0};
constexpr double kTolerance = 1e-6;  // the GPU repeats the reference's rounding; float32 ulps

EST_OP_CASE({.name = "apply_sgd",
             .make_inputs = lists_of({kSigned, kSigned}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1);
                   run_op<OpId::kApplySgd>(var, grad, 0.05);
                   return flatten_all({&var});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_momentum",
             .make_inputs = lists_of({kSigned, kSigned, kSigned}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), accum = list(in, 2);
                   run_op<OpId::kApplyMomentum>(var, grad, accum, 0.05, 0.9, false);
                   return flatten_all({&var, &accum});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_momentum/nesterov",
             .make_inputs = lists_of({kSigned, kSigned, kSigned}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), accum = list(in, 2);
                   run_op<OpId::kApplyMomentum>(var, grad, accum, 0.05, 0.9, true);
                   return flatten_all({&var, &accum});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_adam",
             .make_inputs = lists_of({kSigned, kSigned, kSigned, kPositive}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), m = list(in, 2), v = list(in, 3);
                   run_op<OpId::kApplyAdam>(var, grad, m, v, 0.01, 0.9, 0.999, 1e-7);
                   return flatten_all({&var, &m, &v});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_adagrad",
             .make_inputs = lists_of({kSigned, kSigned, kPositive}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), accum = list(in, 2);
                   run_op<OpId::kApplyAdagrad>(var, grad, accum, 0.1);
                   return flatten_all({&var, &accum});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_rmsprop",
             .make_inputs = lists_of({kSigned, kSigned, kPositive, kSigned}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), ms = list(in, 2), mom = list(in, 3);
                   std::vector<Tensor> none;
                   run_op<OpId::kApplyRmsprop>(
                       var, grad, ms, none, mom,
                       ops::RmspropParams{
                           .learning_rate = 0.01, .decay = 0.9, .momentum = 0.5, .epsilon = 1e-6});
                   return flatten_all({&var, &ms, &mom});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

EST_OP_CASE({.name = "apply_rmsprop/centered",
             .make_inputs = lists_of({kSigned, kSigned, {1.0, 2.0}, kSigned, {-0.5, 0.5}}),
             .run =
                 [](const Inputs& in) {
                   auto var = list(in, 0), grad = list(in, 1), ms = list(in, 2), mom = list(in, 3),
                        mg = list(in, 4);
                   run_op<OpId::kApplyRmsprop>(var, grad, ms, mg, mom,
                                               ops::RmspropParams{.learning_rate = 0.01,
                                                                  .decay = 0.9,
                                                                  .momentum = 0.5,
                                                                  .epsilon = 1e-6,
                                                                  .centered = true});
                   return flatten_all({&var, &ms, &mom, &mg});
                 },
             .forward_tolerance = kTolerance,
             .bfloat16 = false});

}  // namespace
}  // namespace est::testing
