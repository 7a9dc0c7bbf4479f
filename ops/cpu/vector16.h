// Sixteen floats as one GCC vector (64 bytes: a ZMM register where the CPU has AVX-512, two YMM
// otherwise), with unaligned loads and stores, for the kernels written with GCC's vector
// extension (conv_max_pool.cpp, conv_kernel_gradient.cpp). The vectors never cross a non-inlined
// call in a multiversioned copy (cpu/isa.h), so GCC's note about their ABI is silenced here.
#pragma once

#include <cstring>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace est::ops::cpu::vec {

using Vector16 = float __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;

inline Vector16 load16(const float* p) {
  Vector16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store16(float* p, Vector16 v) { std::memcpy(p, &v, sizeof v); }

}  // namespace est::ops::cpu::vec

#pragma GCC diagnostic pop
