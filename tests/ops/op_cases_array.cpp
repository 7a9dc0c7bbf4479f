// Harness cases for ops/array_ops.h: layout ops (reshape, transpose, concat, stack, slice,
// expand_dims, squeeze), gather with repeated ids along different axes, cast and one_hot.
#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::DType;
using ops::Generator;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

constexpr auto uniform = [](std::vector<Shape> shapes) {
  return uniform_inputs(std::move(shapes));
};

template <class Fn>
auto unary(Fn fn) {
  return [fn](const Inputs& in) { return fn(in[0]); };
}

EST_OP_CASE({.name = "reshape",
             .make_inputs = uniform({{2, 3, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::reshape(x, {4, -1});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "flatten",
             .make_inputs = uniform({{3, 2, 2, 3}}),
             .run = unary(ops::flatten),
             .differentiable = {0}});
EST_OP_CASE({.name = "expand_dims/-1",
             .make_inputs = uniform({{3, 2}}),
             .run = unary([](const Tensor& x) {
               return ops::mul(ops::expand_dims(x, -1), x.reshape({3, 1, 2}));
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "squeeze",
             .make_inputs = uniform({{1, 3, 1, 2}}),
             .run = unary([](const Tensor& x) {
               return ops::squeeze(x, {0, 2});
             }),
             .differentiable = {0}});

EST_OP_CASE({.name = "transpose/2d",
             .make_inputs = uniform({{5, 3}}),
             .run = unary([](const Tensor& x) { return ops::transpose(x); }),
             .differentiable = {0}});
EST_OP_CASE({.name = "transpose/2d_large_tiled",
             .make_inputs = uniform({{67, 45}}),
             .run = unary([](const Tensor& x) {
               return ops::transpose(x, {1, 0});
             })});
EST_OP_CASE({.name = "transpose/3d_201",
             .make_inputs = uniform({{2, 3, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::transpose(x, {2, 0, 1});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "transpose/4d_nhwc_to_nchw",
             .make_inputs = uniform({{2, 3, 2, 3}}),
             .run = unary([](const Tensor& x) {
               return ops::transpose(x, {0, 3, 1, 2});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "transpose/identity",
             .make_inputs = uniform({{3, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::transpose(x, {0, 1});
             }),
             .differentiable = {0}});

auto run_concat(int axis) {
  return [axis](const Inputs& in) { return ops::concat(in, axis); };
}
EST_OP_CASE({.name = "concat/axis0",
             .make_inputs = uniform({{2, 3}, {1, 3}, {4, 3}}),
             .run = run_concat(0),
             .differentiable = {0, 1, 2}});
EST_OP_CASE({.name = "concat/axis1",
             .make_inputs = uniform({{2, 3, 2}, {2, 1, 2}}),
             .run = run_concat(1),
             .differentiable = {0, 1}});
EST_OP_CASE({.name = "concat/last_negative",
             .make_inputs = uniform({{3, 2}, {3, 5}, {3, 1}}),
             .run = run_concat(-1),
             .differentiable = {0, 2}});
EST_OP_CASE({.name = "stack/axis1",
             .make_inputs = uniform({{3, 2}, {3, 2}}),
             .run = [](const Inputs& in) { return ops::stack(in, 1); },
             .differentiable = {0, 1}});
EST_OP_CASE({.name = "stack/axis0",
             .make_inputs = uniform({{4}, {4}, {4}}),
             .run = [](const Inputs& in) { return ops::stack(in); },
             .differentiable = {0, 1, 2}});

EST_OP_CASE({.name = "slice/window",
             .make_inputs = uniform({{4, 5, 3}}),
             .run = unary([](const Tensor& x) {
               return ops::slice(x, {1, 2, 0}, {2, -1, 2});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "slice/rows",
             .make_inputs = uniform({{6, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::slice(x, {2, 0}, {3, 4});
             }),
             .differentiable = {0}});

// params [rows, ...] and indices with repeated ids (so the gradient must accumulate).
auto gather_inputs(Shape params, Shape indices, int64_t rows, DType index_dtype) {
  return [=](DType dtype, Generator& g) {
    return Inputs{ops::random_uniform(params, -1, 1, g, dtype),
                  ops::random_uniform(indices, 0, static_cast<double>(rows), g, index_dtype)};
  };
}
EST_OP_CASE({.name = "gather/axis0_embedding",
             .make_inputs = gather_inputs({5, 3}, {7}, 5, DType::kI64),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1]); },
             .differentiable = {0}});
EST_OP_CASE({.name = "gather/axis1_matrix_ids",
             .make_inputs = gather_inputs({2, 4, 3}, {2, 3}, 4, DType::kI32),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1], 1); },
             .differentiable = {0}});
EST_OP_CASE({.name = "gather/last_axis",
             .make_inputs = gather_inputs({3, 6}, {4}, 6, DType::kI64),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1], -1); },
             .differentiable = {0}});

EST_OP_CASE({.name = "cast/to_float64",
             .make_inputs = uniform({{3, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::mul(ops::cast(x, DType::kF64), ops::cast(x, DType::kF64));
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "cast/to_int32",
             .make_inputs =
                 [](DType dtype, Generator& g) {
                   return Inputs{ops::random_uniform({9}, -5, 5, g, dtype)};
                 },
             .run = unary([](const Tensor& x) { return ops::cast(x, DType::kI32); })});
EST_OP_CASE({.name = "one_hot",
             .make_inputs =
                 [](DType, Generator& g) {
                   return Inputs{ops::random_uniform({2, 3}, -1, 5, g, DType::kI64)};
                 },
             .run = unary([](const Tensor& ids) { return ops::one_hot(ids, 4, 2.0, -1.0); })});

}  // namespace
}  // namespace est::testing
