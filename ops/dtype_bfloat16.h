// bfloat16: the 16-bit brain floating point format (1 sign, 8 exponent, 7 mantissa bits), the
// upper half of an IEEE float32, as TensorFlow's DT_BFLOAT16 and Eigen's Eigen::bfloat16 store it.
//
// A trivially copyable value type over its 16 bits. Conversion from float rounds to nearest,
// ties to even, on the bit pattern (so float32 denormals round to bfloat16 denormals and values
// past the largest bfloat16 become infinity), as Eigen's float_to_bfloat16_rtne does; a NaN
// stays a NaN of the same sign (quiet bit set, payload truncated). Widening to float is exact
// (the bits shifted up). Other arithmetic types convert through float, as Eigen's do (double
// therefore rounds twice, like TensorFlow's cast from float64). Arithmetic is float's: the
// implicit conversion to float makes `a + b` a float, so a kernel that stores its float result
// into a bfloat16 rounds each output once.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace est::ops {

struct bfloat16 {
  uint16_t bits;

  bfloat16() = default;
  explicit bfloat16(float value) : bits(round_to_bits(value)) {}
  // (enable_if rather than requires: nvcc compiles the .cu files that include this as C++17)
  template <class T,
            std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  explicit bfloat16(T value) : bfloat16(static_cast<float>(value)) {}

  operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  static constexpr bfloat16 from_bits(uint16_t bits) {
    bfloat16 b{};
    b.bits = bits;
    return b;
  }

  // float -> bfloat16 bits, round to nearest even; NaN kept NaN (sign kept, quiet bit set).
  static uint16_t round_to_bits(float value) {
    uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    const uint32_t lsb = (u >> 16) & 1u;
    return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16> &&
              std::is_trivially_default_constructible_v<bfloat16>);

}  // namespace est::ops
