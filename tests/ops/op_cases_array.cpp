// Harness cases for ops/array_ops.h: layout ops (reshape, transpose, concat, stack, slice,
// expand_dims, squeeze), gather with repeated ids along different axes, cast and one_hot.
#include <fmt/format.h>

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

// Cases for the GPU kernels' other paths: dtypes other than float32 (inputs made in their own
// dtype whatever the harness asks, so the GPU runs them too), sizes past one thread block,
// views of more dims than the CUDA kernels index before merging, empty tensors.
template <class Make>
auto fixed_dtype(DType fixed, Make make) {
  return [fixed, make](DType, Generator& g) { return make(fixed, g); };
}
auto random_in(Shape shape, double low, double high) {
  return [shape, low, high](DType dtype, Generator& g) {
    if (ops::is_floating(dtype)) return Inputs{ops::random_uniform(shape, low, high, g, dtype)};
    return Inputs{ops::cast(ops::random_uniform(shape, low, high, g), dtype)};
  };
}
int register_layout_dtype_cases() {
  const std::pair<const char*, DType> dtypes[] = {{"float64", DType::kF64},
                                                  {"int32", DType::kI32},
                                                  {"int64", DType::kI64},
                                                  {"uint8", DType::kU8},
                                                  {"bool", DType::kBool}};
  for (const auto& [name, dtype] : dtypes) {
    const bool floating = ops::is_floating(dtype);
    const std::vector<int> differentiable = floating ? std::vector<int>{0} : std::vector<int>{};
    register_op_case({.name = std::string("transpose/3d_120/") + name,
                      .make_inputs = fixed_dtype(dtype, random_in({3, 4, 5}, 0, 9)),
                      .run = unary([](const Tensor& x) {
                        return ops::transpose(x, {1, 2, 0});
                      }),
                      .differentiable = differentiable});
    register_op_case({.name = std::string("concat/axis1/") + name,
                      .make_inputs =
                          [dtype](DType, Generator& g) {
                            return Inputs{random_in({3, 2, 4}, 0, 9)(dtype, g)[0],
                                          random_in({3, 5, 4}, 0, 9)(dtype, g)[0]};
                          },
                      .run = run_concat(1),
                      .differentiable = floating ? std::vector<int>{0, 1} : std::vector<int>{}});
    register_op_case({.name = std::string("slice/window/") + name,
                      .make_inputs = fixed_dtype(dtype, random_in({4, 6, 3}, 0, 9)),
                      .run = unary([](const Tensor& x) {
                        return ops::slice(x, {1, 2, 1}, {3, 3, -1});
                      }),
                      .differentiable = differentiable});
    register_op_case({.name = std::string("gather/axis1/") + name,
                      .make_inputs =
                          [dtype](DType, Generator& g) {
                            return Inputs{random_in({3, 5, 2}, 0, 9)(dtype, g)[0],
                                          ops::random_uniform({4}, 0, 5, g, DType::kI64)};
                          },
                      .run = [](const Inputs& in) { return ops::gather(in[0], in[1], 1); },
                      .differentiable = differentiable});
  }
  return 0;
}
const int kLayoutDtypeCases = register_layout_dtype_cases();

EST_OP_CASE({.name = "transpose/large_2d",
             .make_inputs = uniform({{300, 257}}),
             .run = unary([](const Tensor& x) { return ops::transpose(x); })});
// Nine dims, four of size 1: the GPU's strided view merges them to fewer than its eight.
EST_OP_CASE({.name = "transpose/rank9",
             .make_inputs = uniform({{2, 1, 3, 1, 2, 1, 2, 1, 3}}),
             .run = unary([](const Tensor& x) {
               return ops::transpose(x, {8, 7, 6, 5, 4, 3, 2, 1, 0});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "concat/large_and_empty",
             .make_inputs = uniform({{300, 50}, {300, 0}, {300, 70}}),
             .run = run_concat(-1)});
EST_OP_CASE({.name = "concat/empty_input",
             .make_inputs = uniform({{3, 2}, {3, 0}, {3, 4}}),
             .run = run_concat(1),
             .differentiable = {0, 2}});
EST_OP_CASE({.name = "slice/large",
             .make_inputs = uniform({{200, 300}}),
             .run = unary([](const Tensor& x) {
               return ops::slice(x, {13, 7}, {150, 250});
             })});
// Many repeated ids into few rows: the GPU gradient's atomic adds collide.
EST_OP_CASE({.name = "gather/large_repeated_ids",
             .make_inputs = gather_inputs({100, 4}, {2000}, 100, DType::kI32),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1]); },
             .differentiable = {0}});
EST_OP_CASE({.name = "gather/large_forward",
             .make_inputs = gather_inputs({1000, 64}, {20, 250}, 1000, DType::kI64),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1]); }});
// Rows of width 0: nothing to copy, every id still checked.
EST_OP_CASE({.name = "gather/empty_rows",
             .make_inputs = gather_inputs({4, 0}, {3}, 4, DType::kI64),
             .run = [](const Inputs& in) { return ops::gather(in[0], in[1]); }});
int register_one_hot_cases() {
  for (DType dtype : {DType::kF64, DType::kI32, DType::kBool, DType::kU8})
    for (DType index : {DType::kI32, DType::kI64})
      register_op_case({.name = fmt::format("one_hot/{}_ids_to_{}", ops::dtype_name(index),
                                            ops::dtype_name(dtype)),
                        .make_inputs =
                            [index](DType, Generator& g) {
                              return Inputs{ops::random_uniform({3, 40}, -2, 33, g, index)};
                            },
                        .run = unary([dtype](const Tensor& ids) {
                          return ops::one_hot(ids, 30, 1.0, 0.0, dtype);
                        })});
  return 0;
}
const int kOneHotCases = register_one_hot_cases();

}  // namespace
}  // namespace est::testing
