// Harness cases for ops/nn_ops.h: softmax and log_softmax over several axes (the last axis
// runs through oneDNN when available), the three fused cross-entropies and dropout (with a
// generator seeded inside the case, so that every run draws the same mask).
#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::DType;
using ops::Generator;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

// Logits in [-2, 2) unless a case says otherwise.
constexpr auto uniform = [](std::vector<Shape> shapes, double low = -2.0, double high = 2.0) {
  return uniform_inputs(std::move(shapes), low, high);
};

struct SoftmaxVariant {
  std::string name;
  Shape shape;
  int axis;
};
const SoftmaxVariant kSoftmaxVariants[] = {
    {"last", {4, 7}, -1},  {"batch1", {1, 5}, 1},    {"rank3_last", {2, 3, 5}, 2},
    {"axis0", {5, 3}, 0},  {"middle", {2, 4, 3}, 1}, {"vector", {6}, 0},
    {"wide", {3, 33}, -1},
};

int register_softmax_cases() {
  for (const SoftmaxVariant& v : kSoftmaxVariants) {
    register_op_case({.name = "softmax/" + v.name,
                      .make_inputs = uniform({v.shape}),
                      .run = [v](const Inputs& in) { return ops::softmax(in[0], v.axis); },
                      .differentiable = {0}});
    register_op_case({.name = "log_softmax/" + v.name,
                      .make_inputs = uniform({v.shape}),
                      .run = [v](const Inputs& in) { return ops::log_softmax(in[0], v.axis); },
                      .differentiable = {0}});
  }
  return 0;
}
const int kSoftmaxCases = register_softmax_cases();

// Large logits: forward only (finite differences are meaningless at 1e4).
EST_OP_CASE({.name = "softmax/large_logits",
             .make_inputs = uniform({{3, 6}}, -1e4, 1e4),
             .run = [](const Inputs& in) { return ops::softmax(in[0]); }});
EST_OP_CASE({.name = "log_softmax/large_logits",
             .make_inputs = uniform({{3, 6}}, -1e4, 1e4),
             .run = [](const Inputs& in) { return ops::log_softmax(in[0]); }});

// labels first, as in the op's signature.
auto sparse_inputs(int64_t rows, int64_t classes, DType label_dtype) {
  return [=](DType dtype, Generator& g) {
    Tensor labels = ops::random_uniform({rows}, 0, static_cast<double>(classes), g, label_dtype);
    return Inputs{labels, ops::random_uniform({rows, classes}, -3, 3, g, dtype)};
  };
}
auto run_sparse = [](const Inputs& in) {
  return ops::sparse_softmax_cross_entropy_with_logits(in[0], in[1]);
};
EST_OP_CASE({.name = "sparse_softmax_cross_entropy/int64",
             .make_inputs = sparse_inputs(5, 7, DType::kI64),
             .run = run_sparse,
             .differentiable = {1}});
EST_OP_CASE({.name = "sparse_softmax_cross_entropy/int32_batch1",
             .make_inputs = sparse_inputs(1, 4, DType::kI32),
             .run = run_sparse,
             .differentiable = {1}});
EST_OP_CASE({.name = "sparse_softmax_cross_entropy/two_classes",
             .make_inputs = sparse_inputs(6, 2, DType::kI32),
             .run = run_sparse,
             .differentiable = {1}});

// Labels are rows of a random distribution (softmax of random numbers).
EST_OP_CASE(
    {.name = "softmax_cross_entropy/distribution_labels",
     .make_inputs =
         [](DType dtype, Generator& g) {
           Tensor labels = ops::softmax(ops::random_uniform({4, 5}, -2, 2, g, dtype));
           return Inputs{labels, ops::random_uniform({4, 5}, -3, 3, g, dtype)};
         },
     .run = [](const Inputs& in) { return ops::softmax_cross_entropy_with_logits(in[0], in[1]); },
     .differentiable = {0, 1}});
EST_OP_CASE(
    {.name = "softmax_cross_entropy/unnormalised_labels",
     .make_inputs = uniform({{3, 4}, {3, 4}}, 0.0, 1.0),
     .run = [](const Inputs& in) { return ops::softmax_cross_entropy_with_logits(in[0], in[1]); },
     .differentiable = {0, 1}});
EST_OP_CASE(
    {.name = "sigmoid_cross_entropy",
     .make_inputs =
         [](DType dtype, Generator& g) {
           return Inputs{ops::random_uniform({3, 5}, 0, 1, g, dtype),
                         ops::random_uniform({3, 5}, -4, 4, g, dtype)};
         },
     .run = [](const Inputs& in) { return ops::sigmoid_cross_entropy_with_logits(in[0], in[1]); },
     .differentiable = {0, 1}});

EST_OP_CASE({.name = "dropout/rate0.3",
             .make_inputs = uniform({{6, 5}}),
             .run =
                 [](const Inputs& in) {
                   Generator generator(99);
                   return ops::dropout(in[0], 0.3, generator);
                 },
             .differentiable = {0}});

}  // namespace
}  // namespace est::testing
