// Seeded random numbers: a small, fast generator whose whole state is four 64-bit words, so it
// can be saved in a checkpoint and restored exactly.
#pragma once

#include <array>
#include <cstdint>

#include "ops/tensor.h"
#include "ops/xoshiro.h"

namespace est::ops {

// xoshiro256** seeded through splitmix64.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0);
  // Defined here so that the tensor ops' loops inline them.
  uint64_t next_u64() { return xoshiro_next(state_.data()); }
  // Uniform in [0, 1).
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  float next_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  double next_normal();  // standard normal (Box-Muller; a spare value is kept in the state)
  std::array<uint64_t, 4> state() const { return state_; }
  void set_state(const std::array<uint64_t, 4>& state);

 private:
  std::array<uint64_t, 4> state_{};
  bool has_spare_ = false;
  double spare_ = 0.0;
};

Tensor random_uniform(const Shape& shape, double minval, double maxval, Generator& generator,
                      DType dtype = DType::kF32);
Tensor random_normal(const Shape& shape, double mean, double stddev, Generator& generator,
                     DType dtype = DType::kF32);
// Normal values redrawn until within two standard deviations, as tf.random.truncated_normal.
Tensor truncated_normal(const Shape& shape, double mean, double stddev, Generator& generator,
                        DType dtype = DType::kF32);

}  // namespace est::ops
