// Tests of ops/random.h: the generator against published xoshiro256** / splitmix64 values,
// determinism and checkpoint restore through state()/set_state(), and the distributions'
// statistics (bounds are several standard errors wide, so the tests are not flaky for a fixed
// seed yet fail for a wrong distribution).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ops/cuda/xoshiro_jump.h"
#include "ops/ops.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {
struct Moments {
  double mean = 0, stddev = 0, min = INFINITY, max = -INFINITY;
};
Moments moments(const Tensor& t) {
  auto v = t.to_vector<double>();
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}
}  // namespace

TEST_CASE("the generator reproduces the reference xoshiro256** and splitmix64 outputs") {
  // xoshiro256** from state {1, 2, 3, 4}: the sequence given with the reference implementation.
  Generator g;
  g.set_state({1, 2, 3, 4});
  CHECK(g.next_u64() == 11520u);
  CHECK(g.next_u64() == 0u);
  CHECK(g.next_u64() == 1509978240u);
  CHECK(g.next_u64() == 1215971899390074240u);
  // Seeding: four splitmix64 outputs from the seed; splitmix64(0) starts 0xe220a8397b1dcdaf.
  Generator seeded(0);
  CHECK(seeded.state()[0] == 0xe220a8397b1dcdafULL);
  CHECK(seeded.state()[1] == 0x6e789e6aa1b965f4ULL);
  CHECK(seeded.next_u64() == 0x99ec5f36cb75f2b4ULL);
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   g.set_state({0, 0, 0, 0});
                 }),
                 "all-zero state"));
}

TEST_CASE("same seed, same tensors; state()/set_state() resumes exactly") {
  Generator a(2024), b(2024), c(2025);
  Tensor first = random_normal({64}, 0, 1, a);
  CHECK(first.to_vector<float>() == random_normal({64}, 0, 1, b).to_vector<float>());
  CHECK(first.to_vector<float>() != random_normal({64}, 0, 1, c).to_vector<float>());
  // An odd-sized normal tensor leaves no spare behind: the saved words are the whole state.
  random_normal({7}, 0, 1, a);
  auto saved = a.state();
  Tensor next = truncated_normal({5, 3}, 1, 2, a, DType::kF64);
  Tensor uniform = random_uniform({9}, -1, 1, a);
  Generator restored(1);
  restored.set_state(saved);
  CHECK(truncated_normal({5, 3}, 1, 2, restored, DType::kF64).to_vector<double>() ==
        next.to_vector<double>());
  CHECK(random_uniform({9}, -1, 1, restored).to_vector<float>() == uniform.to_vector<float>());
}

TEST_CASE("next_normal keeps a spare that set_state drops") {
  Generator a(7);
  double first = a.next_normal();  // draws a pair, keeps the second
  auto saved = a.state();
  double spare = a.next_normal();  // the spare: consumes no words
  CHECK(a.state() == saved);
  CHECK(spare != first);
  Generator b(99);
  b.set_state(saved);
  double fresh = b.next_normal();  // no spare after set_state: a new pair
  CHECK(fresh != spare);
  CHECK(b.state() != saved);
}

TEST_CASE("uniform draws lie in [min, max) with the right moments") {
  Generator g(11);
  CHECK(g.next_double() < 1.0);
  CHECK(g.next_float() < 1.0f);
  Tensor u = random_uniform({100000}, -2, 3, g);
  Moments m = moments(u);
  CHECK(m.min >= -2);
  CHECK(m.max < 3);
  // Uniform(-2, 3): mean 0.5, sd 5 / sqrt(12) = 1.443; standard error of the mean 0.0046.
  CHECK(std::fabs(m.mean - 0.5) < 0.03);
  CHECK(std::fabs(m.stddev - 5 / std::sqrt(12.0)) < 0.02);
  Tensor ints = random_uniform({10000}, 0, 4, g, DType::kI32);
  std::vector<int> counts(4, 0);
  for (int32_t v : ints.to_vector<int32_t>()) {
    REQUIRE(v >= 0);
    REQUIRE(v < 4);
    ++counts[static_cast<size_t>(v)];
  }
  for (int count : counts) CHECK(std::abs(count - 2500) < 260);  // sd 43: 6 sd
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { random_uniform({2}, 3, 3, g, DType::kI64); }),
      "empty"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { random_uniform({2}, 1, 0, g); }),
                 "maxval 0 is below minval 1"));
}

TEST_CASE("normal and truncated normal statistics") {
  Generator g(12);
  Moments normal = moments(random_normal({100001}, 3, 2, g, DType::kF64));
  // Standard error of the mean 2 / sqrt(1e5) = 0.0063; of the sd about 0.0045.
  CHECK(std::fabs(normal.mean - 3) < 0.04);
  CHECK(std::fabs(normal.stddev - 2) < 0.03);
  CHECK(normal.max > 3 + 2 * 3.5);  // tails exist beyond 3.5 sd in 1e5 draws
  Moments truncated = moments(truncated_normal({100000}, -1, 0.5, g, DType::kF64));
  CHECK(truncated.min >= -1 - 2 * 0.5);
  CHECK(truncated.max <= -1 + 2 * 0.5);
  CHECK(std::fabs(truncated.mean + 1) < 0.01);
  // The sd of a standard normal truncated to [-2, 2] is 0.8796.
  CHECK(std::fabs(truncated.stddev - 0.5 * 0.8796) < 0.006);
  CHECK(contains(error_message<InvalidArgumentError>([&] { random_normal({2}, 0, -1, g); }),
                 "stddev must be >= 0, got -1"));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { random_normal({2}, 0, 1, g, DType::kI32); }),
      "int32"));
}

// The jump-ahead the CUDA dropout kernel uses (ops/cuda/xoshiro_jump.h; plain C++, so tested
// here in every build): its step (ops/xoshiro.h) is Generator's, a jump of k is k steps, and the
// mask built from runs of 128 elements, each jumping to its first element as a GPU thread does, is
// the reference's dropout mask, after which the generator stands where the reference leaves it.
TEST_CASE("xoshiro jump-ahead: the generator's steps, any distance, dropout's mask") {
  const cuda::XoshiroJumpTable& table = cuda::xoshiro_jump_table();
  Generator g(42);
  const std::array<uint64_t, 4> start = g.state();
  uint64_t s[4] = {start[0], start[1], start[2], start[3]};
  for (int i = 0; i < 1000; ++i) REQUIRE(xoshiro_next(s) == g.next_u64());
  for (uint64_t distance : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{127}, uint64_t{128},
                            uint64_t{1000}, uint64_t{65537}}) {
    Generator stepped(7);
    uint64_t jumped[4];
    for (int w = 0; w < 4; ++w) jumped[w] = stepped.state()[static_cast<size_t>(w)];
    cuda::xoshiro_jump(table, jumped, distance);
    for (uint64_t i = 0; i < distance; ++i) stepped.next_u64();
    INFO("distance ", distance);
    CHECK(std::array<uint64_t, 4>{jumped[0], jumped[1], jumped[2], jumped[3]} == stepped.state());
  }
  for (const int64_t n : {int64_t{1}, int64_t{128}, int64_t{1000}}) {
    Generator reference(99), emulated(99);
    const Tensor ones = Tensor::ones({n}, DType::kF64);
    const std::vector<double> expected = dropout(ones, 0.3, reference).to_vector<double>();
    std::vector<double> mask(static_cast<size_t>(n), -1.0);
    const std::array<uint64_t, 4> begin = emulated.state();
    for (int64_t first = 0; first < n; first += 128)  // one GPU thread per run
      cuda::dropout_mask_range(table, begin.data(), static_cast<uint64_t>(first),
                               static_cast<uint64_t>(std::min<int64_t>(128, n - first)), 0.3,
                               1.0 / (1.0 - 0.3), mask.data());
    INFO("n ", n);
    CHECK(mask == expected);
    uint64_t after[4] = {begin[0], begin[1], begin[2], begin[3]};
    cuda::xoshiro_jump(table, after, static_cast<uint64_t>(n));
    CHECK(std::array<uint64_t, 4>{after[0], after[1], after[2], after[3]} == reference.state());
  }
}
