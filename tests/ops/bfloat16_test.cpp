// The bfloat16 dtype: rounding from float32 (to nearest, ties to even; NaN, infinities,
// denormals) against hand-worked bit patterns and against an independent nearest-value search,
// exact widening, and bfloat16 tensors through creation, to_vector, printing and cast.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ops/cpu/isa.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "tests/skip.h"

using namespace est;
using namespace est::ops;

namespace {

float float_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t bits_of_float(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

uint16_t rounded_bits(uint32_t float_bits) { return bfloat16(float_of_bits(float_bits)).bits; }

// The bfloat16 nearest to a finite `f`, found by comparing the two candidates around it in
// double (ties to the even one): an independent reference for the bit trick.
uint16_t nearest_bits(float f) {
  const uint32_t u = bits_of_float(f);
  const uint16_t below = static_cast<uint16_t>(u >> 16);  // toward zero
  const uint16_t above = static_cast<uint16_t>(below + 1);
  const double d = f;
  const double lo = static_cast<float>(bfloat16::from_bits(below));
  const double hi = static_cast<float>(bfloat16::from_bits(above));  // may be infinity
  const double to_lo = std::fabs(d - lo), to_hi = std::isinf(hi) ? 0 : std::fabs(hi - d);
  if (std::isinf(hi)) {
    // past the largest finite bfloat16: infinity when at or beyond its halfway point
    const double halfway = lo + (lo - static_cast<float>(bfloat16::from_bits(below - 1))) / 2;
    return std::fabs(d) >= std::fabs(halfway) ? above : below;
  }
  if (to_lo < to_hi) return below;
  if (to_hi < to_lo) return above;
  return (below & 1) == 0 ? below : above;
}

}  // namespace

TEST_CASE("bfloat16 names and sizes as TensorFlow") {
  CHECK(dtype_name(DType::kBF16) == "bfloat16");
  CHECK(dtype_size(DType::kBF16) == 2);
  CHECK(is_floating(DType::kBF16));
  CHECK_FALSE(is_integral(DType::kBF16));
  CHECK(dtype_of<bfloat16>() == DType::kBF16);
}

TEST_CASE("bfloat16 rounds float32 to nearest, ties to even, by hand") {
  CHECK(rounded_bits(0x3f800000) == 0x3f80);  // 1.0 exactly
  CHECK(rounded_bits(0x3f807fff) == 0x3f80);  // just below halfway: down
  CHECK(rounded_bits(0x3f808000) == 0x3f80);  // halfway, 0x3f80 even: down
  CHECK(rounded_bits(0x3f808001) == 0x3f81);  // just above halfway: up
  CHECK(rounded_bits(0x3f818000) == 0x3f82);  // halfway, 0x3f81 odd: up to even
  CHECK(rounded_bits(0xbf818000) == 0xbf82);  // the same for a negative value
  CHECK(rounded_bits(0x3fffffff) == 0x4000);  // carries into the exponent
  CHECK(rounded_bits(0x80000000) == 0x8000);  // -0 keeps its sign
  // Infinities stay; values past the largest bfloat16 (0x7f7f) round to infinity.
  CHECK(rounded_bits(0x7f800000) == 0x7f80);
  CHECK(rounded_bits(0xff800000) == 0xff80);
  CHECK(rounded_bits(0x7f7f7fff) == 0x7f7f);
  CHECK(rounded_bits(0x7f7f8000) == 0x7f80);  // halfway, 0x7f7f odd: up, to infinity
  CHECK(rounded_bits(0x7f7fffff) == 0x7f80);  // FLT_MAX
  // Denormals round like any other bit pattern (no flush to zero).
  CHECK(rounded_bits(0x00010000) == 0x0001);
  CHECK(rounded_bits(0x00008000) == 0x0000);  // halfway to the smallest denormal: to even 0
  CHECK(rounded_bits(0x00018000) == 0x0002);  // halfway, 0x0001 odd: up
  CHECK(rounded_bits(0x00008001) == 0x0001);
  CHECK(rounded_bits(0x807fffff) == 0x8080);  // the largest denormal rounds to -FLT_MIN
}

TEST_CASE("bfloat16 keeps NaN a NaN, of the same sign") {
  for (uint32_t nan :
       {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7f80ffffu, 0xffc00000u, 0xff800001u}) {
    const bfloat16 b(float_of_bits(nan));
    INFO(nan);
    CHECK(std::isnan(static_cast<float>(b)));
    CHECK((b.bits & 0x8000) == ((nan >> 16) & 0x8000));
  }
}

TEST_CASE("bfloat16 widens exactly and round-trips every pattern") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const bfloat16 b = bfloat16::from_bits(static_cast<uint16_t>(bits));
    const float f = b;
    CHECK(bits_of_float(f) == bits << 16);
    if (!std::isnan(f)) CHECK(bfloat16(f).bits == bits);
  }
}

TEST_CASE("bfloat16 rounding agrees with a nearest-value search on random floats") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = any_bits(rng);
    const float f = float_of_bits(u);
    if (std::isnan(f) || std::isinf(f)) continue;
    INFO(u);
    REQUIRE(bfloat16(f).bits == nearest_bits(f));
    ++checked;
  }
  CHECK(checked > 190000);
}

TEST_CASE("bfloat16 converts from other arithmetic types through float") {
  CHECK(static_cast<float>(bfloat16(3)) == 3.0f);
  CHECK(static_cast<float>(bfloat16(int64_t{257})) == 256.0f);  // 257 needs 9 bits: to even
  CHECK(static_cast<float>(bfloat16(0.1)) == static_cast<float>(bfloat16(0.1f)));
  CHECK(static_cast<int>(bfloat16(-2.75f)) == -2);
  CHECK(static_cast<bool>(bfloat16(0.0f)) == false);
}

TEST_CASE("bfloat16 tensors: creation, to_vector, printing and cast") {
  Tensor t = Tensor::from_vector<bfloat16>({bfloat16(1.0f), bfloat16(-2.5f), bfloat16(3.0f)}, {3});
  CHECK(t.dtype() == DType::kBF16);
  CHECK(t.nbytes() == 6);
  CHECK(t.to_vector<float>() == std::vector<float>{1.0f, -2.5f, 3.0f});
  CHECK(t.at({1}) == -2.5);
  CHECK(t.str() == "Tensor([1, -2.5, 3], shape=[3], dtype=bfloat16, device=/cpu:0)");
  CHECK(Tensor::full({2}, 1.00390625, DType::kBF16).to_vector<float>() ==
        std::vector<float>{1.0f, 1.0f});  // 1 + 2^-8 is a tie: to even
  CHECK(Tensor::zeros({2, 2}, DType::kBF16).to_vector<double>() == std::vector<double>(4, 0.0));

  // cast float32 -> bfloat16 rounds each element once, as the scalar conversion does
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> values(1000);
  for (float& v : values) v = normal(rng);
  values[0] = std::numeric_limits<float>::quiet_NaN();
  values[1] = -std::numeric_limits<float>::infinity();
  values[2] = float_of_bits(0x00018000);
  Tensor narrow = cast(Tensor::from_vector(values, {1000}), DType::kBF16);
  CHECK(narrow.dtype() == DType::kBF16);
  const bfloat16* stored = narrow.data<bfloat16>();
  for (size_t i = 0; i < values.size(); ++i) {
    INFO(i);
    if (i == 0)
      CHECK(std::isnan(static_cast<float>(stored[i])));
    else
      CHECK(stored[i].bits == bfloat16(values[i]).bits);
  }
  // back to float32 exactly, and to the other dtypes through float
  Tensor wide = cast(narrow, DType::kF32);
  for (size_t i = 1; i < values.size(); ++i) CHECK(wide.data<float>()[i] == float(stored[i]));
  Tensor small = Tensor::from_vector<float>({-3.75f, 0.0f, 2.5f}, {3});
  CHECK(cast(cast(small, DType::kBF16), DType::kI32).to_vector<int32_t>() ==
        std::vector<int32_t>{-3, 0, 2});
  CHECK(cast(cast(small, DType::kBF16), DType::kBool).to_vector<int32_t>() ==
        std::vector<int32_t>{1, 0, 1});
  CHECK(cast(Tensor::from_vector<int64_t>({257, -3}, {2}), DType::kBF16).to_vector<float>() ==
        std::vector<float>{256.0f, -3.0f});
}

TEST_CASE("bfloat16 arithmetic rounds each result once and its gradient is bfloat16") {
  Tensor a = cast(Tensor::from_vector<float>({1.0f, 3.0f}, {2}), DType::kBF16);
  Tensor b = cast(Tensor::from_vector<float>({0.00390625f, 0.01171875f}, {2}), DType::kBF16);
  // 1 + 2^-8 ties to 1; 3 + 0.01171875 = 3.01171875 rounds to 3.015625 (nearest)
  Tensor sum = add(a, b);
  CHECK(sum.dtype() == DType::kBF16);
  CHECK(sum.to_vector<float>() == std::vector<float>{1.0f, 3.015625f});
  Tensor x = cast(Tensor::from_vector<float>({0.5f, -1.5f, 2.0f}, {3}), DType::kBF16);
  x.set_requires_grad(true);
  Tensor loss = ops::sum(mul(x, x));
  CHECK(loss.dtype() == DType::kBF16);
  CHECK(loss.item() == 6.5);
  std::vector<Tensor> g = gradients(loss, {x});
  CHECK(g[0].dtype() == DType::kBF16);
  CHECK(g[0].to_vector<float>() == std::vector<float>{1.0f, -3.0f, 4.0f});
}

TEST_CASE("bfloat16 float32 cast passes the gradient back in float32") {
  Tensor w = Tensor::from_vector<float>({0.25f, 2.0f}, {2});
  w.set_requires_grad(true);
  Tensor y = ops::sum(mul(cast(w, DType::kBF16), cast(w, DType::kBF16)));
  std::vector<Tensor> g = gradients(y, {w});
  CHECK(g[0].dtype() == DType::kF32);
  CHECK(g[0].to_vector<float>() == std::vector<float>{0.5f, 4.0f});
}

TEST_CASE("bfloat16 linear runs oneDNN's bfloat16 matmul on an AVX-512 CPU") {
  if (!backend_available(Backend::kOneDnn))
    return est::testing::skip("oneDNN is not built or not available");
  if (!cpu::has_avx512_core())
    return est::testing::skip("this CPU has no avx512_core: oneDNN declines bfloat16");
  ops::Generator generator(9);
  Tensor x = cast(random_uniform({16, 24}, -1.0, 1.0, generator), DType::kBF16);
  Tensor w = cast(random_uniform({24, 8}, -1.0, 1.0, generator), DType::kBF16);
  Tensor b = cast(random_uniform({8}, -1.0, 1.0, generator), DType::kBF16);
  const KernelTarget onednn{DeviceType::kCPU, Backend::kOneDnn};
  const int64_t before = kernel_dispatch_count(OpId::kMatmul, onednn);
  Tensor y;
  {
    BackendGuard guard(Backend::kOneDnn);
    y = linear(x, w, b, Activation::kRelu);
  }
  CHECK(kernel_dispatch_count(OpId::kMatmul, onednn) == before + 1);
  CHECK(y.dtype() == DType::kBF16);
  Tensor reference;
  {
    BackendGuard guard(Backend::kReference);
    reference = linear(x, w, b, Activation::kRelu);
  }
  // both accumulate in float32 and round once; the summation order may differ
  const std::vector<float> got = y.to_vector<float>(), want = reference.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(i);
    CHECK(std::fabs(got[i] - want[i]) <= std::fabs(want[i]) / 128 + 1e-6);
  }
}
