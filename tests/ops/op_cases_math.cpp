// Harness cases for ops/math.h: binary ops under every broadcasting pattern, the unary ops and
// activations, reductions over various axes with and without keepdims, comparisons and the
// broadcast helpers. Inputs of ops with kinks (relu, abs, clip, maximum) are kept away from
// the kink so that central finite differences are meaningful.
#include <cmath>

#include "tests/ops/harness.h"

namespace est::testing {
namespace {

using ops::DType;
using ops::Generator;
using ops::Tensor;
using Inputs = std::vector<Tensor>;

// Uniform inputs in [low, high), one per shape.
constexpr auto uniform = [](std::vector<Shape> shapes, double low = -1.0, double high = 1.0) {
  return uniform_inputs(std::move(shapes), low, high);
};

// Values in +-[low, high) with random signs: at least `low` away from 0.
Tensor away_from_zero(const Shape& shape, double low, double high, DType dtype, Generator& g) {
  std::vector<double> values(static_cast<size_t>(ops::num_elements(shape)));
  for (double& v : values) {
    v = low + (high - low) * g.next_double();
    if (g.next_u64() & 1) v = -v;
  }
  return ops::cast(Tensor::from_vector(values, shape), dtype);
}

auto kinked(std::vector<Shape> shapes, double low = 0.1, double high = 1.0) {
  return [shapes, low, high](DType dtype, Generator& generator) {
    Inputs inputs;
    for (const Shape& s : shapes) inputs.push_back(away_from_zero(s, low, high, dtype, generator));
    return inputs;
  };
}

// a near multiples of 0.4 and b near multiples of 0.4 plus 0.2 (each within 0.05): every pair
// differs by at least 0.1 whatever the broadcasting, so maximum/minimum never tie.
Tensor on_grid(const Shape& shape, double shift, DType dtype, Generator& g) {
  std::vector<double> values(static_cast<size_t>(ops::num_elements(shape)));
  for (double& v : values)
    v = 0.4 * std::floor(g.next_double() * 7 - 3) + shift + 0.1 * (g.next_double() - 0.5);
  return ops::cast(Tensor::from_vector(values, shape), dtype);
}

Inputs separated_pair(const Shape& a_shape, const Shape& b_shape, DType dtype, Generator& g) {
  return {on_grid(a_shape, 0.0, dtype, g), on_grid(b_shape, 0.2, dtype, g)};
}

template <class Fn>
auto binary(Fn fn) {
  return [fn](const Inputs& in) { return fn(in[0], in[1]); };
}

template <class Fn>
auto unary(Fn fn) {
  return [fn](const Inputs& in) { return fn(in[0]); };
}

// Binary arithmetic: every broadcasting pattern the kernels special-case, and some they don't.
const std::vector<std::pair<std::string, std::vector<Shape>>> kBroadcastShapes = {
    {"same", {{3, 5}, {3, 5}}},        {"row", {{4, 3}, {3}}},
    {"column", {{4, 3}, {4, 1}}},      {"outer", {{4, 1}, {1, 3}}},
    {"scalar_left", {{}, {2, 3}}},     {"scalar_right", {{2, 3}, {1}}},
    {"batch1", {{1, 7}, {7}}},         {"general", {{2, 1, 3}, {4, 1}}},
    {"odd_rank3", {{3, 5, 7}, {5, 1}}}};

int register_binary_cases() {
  struct Op {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
  const Op ops_list[] = {{"add", ops::add},
                         {"sub", ops::sub},
                         {"mul", ops::mul},
                         {"squared_difference", ops::squared_difference}};
  for (const Op& op : ops_list)
    for (const auto& [variant, shapes] : kBroadcastShapes)
      register_op_case({.name = std::string(op.name) + "/" + variant,
                        .make_inputs = uniform(shapes),
                        .run = binary(op.fn),
                        .differentiable = {0, 1}});
  for (const auto& [variant, shapes] : kBroadcastShapes) {
    register_op_case({.name = "div/" + variant,
                      .make_inputs =
                          [shapes](DType dtype, Generator& g) {
                            return Inputs{ops::random_uniform(shapes[0], -1, 1, g, dtype),
                                          away_from_zero(shapes[1], 0.5, 2.0, dtype, g)};
                          },
                      .run = binary(ops::div),
                      .differentiable = {0, 1}});
    register_op_case({.name = "maximum/" + variant,
                      .make_inputs =
                          [shapes](DType dtype, Generator& g) {
                            return separated_pair(shapes[0], shapes[1], dtype, g);
                          },
                      .run = binary(ops::maximum),
                      .differentiable = {0, 1}});
  }
  return 0;
}
const int kBinaryCases = register_binary_cases();

// Random broadcast pairs, drawn once from a fixed seed: a of rank 1-4 with dims 1-5, b a
// suffix of a's shape with some dims set to 1 (and the roles swapped half of the time).
int register_random_shape_cases() {
  Generator shapes(2718);
  for (int k = 0; k < 6; ++k) {
    Shape a(1 + shapes.next_u64() % 4);
    for (int64_t& d : a) d = 1 + static_cast<int64_t>(shapes.next_u64() % 5);
    Shape b(a.begin() + static_cast<std::ptrdiff_t>(shapes.next_u64() % a.size()), a.end());
    for (int64_t& d : b)
      if (shapes.next_u64() % 2) d = 1;
    if (shapes.next_u64() % 2) std::swap(a, b);
    std::string name = "random_shapes/" + ops::shape_str(a) + "x" + ops::shape_str(b);
    register_op_case(
        {.name = "mul/" + name,
         .make_inputs = uniform({a, b}),
         .run = binary([](const Tensor& x, const Tensor& y) { return ops::mul(x, y); }),
         .differentiable = {0, 1}});
    register_op_case(
        {.name = "sub/" + name,
         .make_inputs = uniform({a, b}),
         .run = binary([](const Tensor& x, const Tensor& y) { return ops::sub(x, y); }),
         .differentiable = {0, 1}});
  }
  return 0;
}
const int kRandomShapeCases = register_random_shape_cases();

EST_OP_CASE({.name = "minimum/row",
             .make_inputs =
                 [](DType dtype, Generator& g) {
                   return separated_pair({5, 3}, {3}, dtype, g);
                 },
             .run = binary(ops::minimum),
             .differentiable = {0, 1}});
EST_OP_CASE({.name = "pow/tensor_exponent",
             .make_inputs =
                 [](DType dtype, Generator& g) {
                   return Inputs{ops::random_uniform({3, 4}, 0.5, 2.0, g, dtype),
                                 ops::random_uniform({4}, -1.5, 1.5, g, dtype)};
                 },
             .run = binary(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(ops::pow)),
             .differentiable = {0, 1}});
EST_OP_CASE({.name = "pow/scalar_2",
             .make_inputs = uniform({{3, 5}}),
             .run = unary([](const Tensor& x) { return ops::pow(x, 2.0); }),
             .differentiable = {0}});
EST_OP_CASE({.name = "pow/scalar_half",
             .make_inputs = uniform({{7}}, 0.5, 2.0),
             .run = unary([](const Tensor& x) { return ops::pow(x, 0.5); }),
             .differentiable = {0}});
EST_OP_CASE({.name = "pow/scalar_-1.5",
             .make_inputs = uniform({{2, 3}}, 0.5, 2.0),
             .run = unary([](const Tensor& x) { return ops::pow(x, -1.5); }),
             .differentiable = {0}});
EST_OP_CASE({.name = "add/double",
             .make_inputs = uniform({{3, 4}}),
             .run = unary([](const Tensor& x) { return ops::add(x, 0.75); }),
             .differentiable = {0}});
EST_OP_CASE({.name = "mul/double",
             .make_inputs = uniform({{5}}),
             .run = unary([](const Tensor& x) { return -2.5 * x; }),
             .differentiable = {0}});

// Unary ops and activations.
EST_OP_CASE({.name = "neg",
             .make_inputs = uniform({{3, 4}}),
             .run = unary(ops::neg),
             .differentiable = {0}});
EST_OP_CASE({.name = "exp",
             .make_inputs = uniform({{3, 7}}, -3, 3),
             .run = unary(ops::exp),
             .differentiable = {0}});
EST_OP_CASE({.name = "exp/batch1",
             .make_inputs = uniform({{1, 5}}),
             .run = unary(ops::exp),
             .differentiable = {0}});
EST_OP_CASE({.name = "log",
             .make_inputs = uniform({{4, 5}}, 0.2, 3),
             .run = unary(ops::log),
             .differentiable = {0}});
EST_OP_CASE({.name = "sqrt",
             .make_inputs = uniform({{13}}, 0.2, 3),
             .run = unary(ops::sqrt),
             .differentiable = {0}});
EST_OP_CASE({.name = "square",
             .make_inputs = uniform({{2, 3, 2}}),
             .run = unary(ops::square),
             .differentiable = {0}});
EST_OP_CASE({.name = "abs",
             .make_inputs = kinked({{3, 5}}),
             .run = unary(ops::abs),
             .differentiable = {0}});
EST_OP_CASE({.name = "relu",
             .make_inputs = kinked({{4, 6}}),
             .run = unary(ops::relu),
             .differentiable = {0}});
EST_OP_CASE({.name = "relu/rank4",
             .make_inputs = kinked({{2, 3, 3, 2}}),
             .run = unary(ops::relu),
             .differentiable = {0}});
EST_OP_CASE({.name = "sigmoid",
             .make_inputs = uniform({{5, 3}}, -6, 6),
             .run = unary(ops::sigmoid),
             .differentiable = {0}});
EST_OP_CASE({.name = "tanh",
             .make_inputs = uniform({{3, 5}}, -3, 3),
             .run = unary(ops::tanh),
             .differentiable = {0}});
EST_OP_CASE({.name = "clip",
             .make_inputs =
                 [](DType dtype, Generator& g) {
                   // Values in +-[0.05, 0.45] or +-[0.55, 1.5]: away from the bounds +-0.5.
                   Tensor small = away_from_zero({3, 4}, 0.05, 0.45, dtype, g);
                   Tensor large = away_from_zero({3, 4}, 0.55, 1.5, dtype, g);
                   return Inputs{ops::concat({small, large}, 0)};
                 },
             .run = unary([](const Tensor& x) { return ops::clip(x, -0.5, 0.5); }),
             .differentiable = {0}});

// Reductions. max uses distinct random values (ties are tested in math_test.cpp).
struct Reduction {
  std::string name;
  Shape shape;
  std::vector<int> axes;
  bool keepdims;
};
const Reduction kReductions[] = {
    {"all", {3, 4}, {}, false},
    {"all_keepdims", {3, 4}, {}, true},
    {"axis0", {5, 3}, {0}, false},
    {"axis1_keepdims", {5, 3}, {1}, true},
    {"last_negative", {2, 3, 4}, {-1}, false},
    {"middle", {2, 5, 3}, {1}, false},
    {"outer_pair", {3, 2, 4}, {0, 2}, true},
    {"leading_pair", {2, 3, 4}, {0, 1}, false},
    {"batch1", {1, 7}, {1}, false},
    {"vector", {9}, {0}, false},
};

int register_reduction_cases() {
  for (const Reduction& r : kReductions) {
    register_op_case(
        {.name = "sum/" + r.name,
         .make_inputs = uniform({r.shape}),
         .run = unary([r](const Tensor& x) { return ops::sum(x, r.axes, r.keepdims); }),
         .differentiable = {0}});
    register_op_case(
        {.name = "mean/" + r.name,
         .make_inputs = uniform({r.shape}),
         .run = unary([r](const Tensor& x) { return ops::mean(x, r.axes, r.keepdims); }),
         .differentiable = {0}});
    register_op_case(
        {.name = "max/" + r.name,
         .make_inputs = uniform({r.shape}),
         .run = unary([r](const Tensor& x) { return ops::max(x, r.axes, r.keepdims); }),
         .differentiable = {0}});
  }
  return 0;
}
const int kReductionCases = register_reduction_cases();

EST_OP_CASE({.name = "argmax/axis1",
             .make_inputs = uniform({{4, 6}}),
             .run = unary([](const Tensor& x) { return ops::argmax(x, 1); })});
EST_OP_CASE({.name = "argmax/axis0_rank3",
             .make_inputs = uniform({{5, 2, 3}}),
             .run = unary([](const Tensor& x) { return ops::argmax(x, 0); })});

// Comparisons on values rounded to a coarse grid, so that some elements are equal.
auto coarse(std::vector<Shape> shapes) {
  return [shapes](DType dtype, Generator& g) {
    Inputs inputs;
    for (const Shape& s : shapes) {
      std::vector<double> values(static_cast<size_t>(ops::num_elements(s)));
      for (double& v : values) v = std::floor(g.next_double() * 3);
      inputs.push_back(ops::cast(Tensor::from_vector(values, s), dtype));
    }
    return inputs;
  };
}
EST_OP_CASE({.name = "equal/row", .make_inputs = coarse({{4, 3}, {3}}), .run = binary(ops::equal)});
EST_OP_CASE({.name = "greater/outer",
             .make_inputs = coarse({{4, 1}, {1, 5}}),
             .run = binary(ops::greater)});
EST_OP_CASE({.name = "less/same",
             .make_inputs = coarse({{3, 3}, {3, 3}}),
             .run = binary(ops::less)});

EST_OP_CASE({.name = "broadcast_to/row",
             .make_inputs = uniform({{3}}),
             .run = unary([](const Tensor& x) {
               return ops::broadcast_to(x, {4, 3});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "broadcast_to/middle",
             .make_inputs = uniform({{2, 1, 3}}),
             .run = unary([](const Tensor& x) {
               return ops::broadcast_to(x, {2, 2, 4, 3});
             }),
             .differentiable = {0}});
EST_OP_CASE({.name = "sum_to/leading_and_inner",
             .make_inputs = uniform({{2, 3, 4}}),
             .run = unary([](const Tensor& x) {
               return ops::sum_to(x, {3, 1});
             }),
             .differentiable = {0}});

}  // namespace
}  // namespace est::testing
