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

// Cases for the GPU kernels' other paths: rows longer than a thread block, more rows than the
// grid's 65536 blocks (forward only: finite differences over them would be slow), softmax off
// the last axis with many classes, float64 inputs (made in float64 whatever the harness asks,
// so the GPU runs them too), and dropout's mask over many elements and twice from one generator
// (the second mask starts where the first left the generator).
const SoftmaxVariant kLargeSoftmaxVariants[] = {
    {"long_rows", {2, 600}, -1},
    {"middle_many_classes", {2, 300, 2}, 1},
};
int register_large_softmax_cases() {
  for (const SoftmaxVariant& v : kLargeSoftmaxVariants) {
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
const int kLargeSoftmaxCases = register_large_softmax_cases();
EST_OP_CASE({.name = "softmax/many_rows",
             .make_inputs = uniform({{70000, 3}}),
             .run = [](const Inputs& in) { return ops::softmax(in[0]); }});
EST_OP_CASE({.name = "log_softmax/many_rows_large_logits",
             .make_inputs = uniform({{70000, 5}}, -1e4, 1e4),
             .run = [](const Inputs& in) { return ops::log_softmax(in[0]); }});
EST_OP_CASE({.name = "softmax/float64",
             .make_inputs =
                 [](DType, Generator& g) {
                   return uniform({{5, 40}})(DType::kF64, g);
                 },
             .run = [](const Inputs& in) { return ops::softmax(in[0]); },
             .differentiable = {0}});
EST_OP_CASE({.name = "log_softmax/float64_axis0",
             .make_inputs =
                 [](DType, Generator& g) {
                   return uniform({{40, 5}})(DType::kF64, g);
                 },
             .run = [](const Inputs& in) { return ops::log_softmax(in[0], 0); },
             .differentiable = {0}});

EST_OP_CASE({.name = "sparse_softmax_cross_entropy/long_rows",
             .make_inputs = sparse_inputs(2, 600, DType::kI32),
             .run = run_sparse,
             .differentiable = {1}});
EST_OP_CASE({.name = "sparse_softmax_cross_entropy/many_rows",
             .make_inputs = sparse_inputs(70000, 3, DType::kI64),
             .run = run_sparse});
EST_OP_CASE({.name = "sparse_softmax_cross_entropy/float64",
             .make_inputs =
                 [](DType, Generator& g) {
                   return sparse_inputs(6, 45, DType::kI64)(DType::kF64, g);
                 },
             .run = run_sparse,
             .differentiable = {1}});
auto run_dense = [](const Inputs& in) {
  return ops::softmax_cross_entropy_with_logits(in[0], in[1]);
};
EST_OP_CASE({.name = "softmax_cross_entropy/long_rows",
             .make_inputs = uniform({{2, 400}, {2, 400}}, 0.0, 1.0),
             .run = run_dense,
             .differentiable = {0, 1}});
EST_OP_CASE({.name = "softmax_cross_entropy/many_rows",
             .make_inputs = uniform({{70000, 3}, {70000, 3}}, 0.0, 1.0),
             .run = run_dense});
EST_OP_CASE({.name = "softmax_cross_entropy/float64",
             .make_inputs =
                 [](DType, Generator& g) {
                   return uniform({{4, 37}, {4, 37}}, 0.0, 1.0)(DType::kF64, g);
                 },
             .run = run_dense,
             .differentiable = {0, 1}});
EST_OP_CASE(
    {.name = "sigmoid_cross_entropy/float64_large_logits",
     .make_inputs =
         [](DType, Generator& g) {
           return Inputs{ops::random_uniform({5, 300}, 0, 1, g, DType::kF64),
                         ops::random_uniform({5, 300}, -50, 50, g, DType::kF64)};
         },
     .run = [](const Inputs& in) { return ops::sigmoid_cross_entropy_with_logits(in[0], in[1]); },
     .differentiable = {0, 1},
     .finite_difference_step = 1e-5});

EST_OP_CASE({.name = "dropout/large",
             .make_inputs = uniform({{1000, 37}}),
             .run = [](const Inputs& in) {
               Generator generator(5);
               return ops::dropout(in[0], 0.5, generator);
             }});
EST_OP_CASE({.name = "dropout/twice_from_one_generator",
             .make_inputs = uniform({{7, 61}}),
             .run =
                 [](const Inputs& in) {
                   Generator generator(11);
                   Tensor first = ops::dropout(in[0], 0.25, generator);
                   return ops::add(first, ops::dropout(in[0], 0.6, generator));
                 },
             .differentiable = {0}});
EST_OP_CASE({.name = "dropout/float64",
             .make_inputs =
                 [](DType, Generator& g) {
                   return uniform({{9, 130}})(DType::kF64, g);
                 },
             .run =
                 [](const Inputs& in) {
                   Generator generator(3);
                   return ops::dropout(in[0], 0.1, generator);
                 }});

}  // namespace
}  // namespace est::testing
