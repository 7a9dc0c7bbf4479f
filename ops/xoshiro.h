// One step of xoshiro256** (Blackman and Vigna): the generator of ops/random.h, and the step the
// CUDA dropout kernel repeats on the device (ops/cuda/xoshiro_jump.h). Plain C++, host and device
// code under nvcc, so that both draw from one definition.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EST_HOST_DEVICE __host__ __device__
#else
#define EST_HOST_DEVICE
#endif

namespace est::ops {

// Advances the state `s` one step; returns the draw it yields.
EST_HOST_DEVICE inline uint64_t xoshiro_next(uint64_t s[4]) {
  const uint64_t x = s[1] * 5;
  const uint64_t result = ((x << 7) | (x >> 57)) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return result;
}

}  // namespace est::ops
