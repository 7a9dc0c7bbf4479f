// Initializers: how a variable's first value is drawn, with Keras's formulas and defaults.
//
// An Initializer is a plain function object of (shape, dtype, generator), so a user can pass a
// lambda. The generator is the ModelContext's, seeded from the run's seed: the same program
// with the same seed creates the same weights on every worker.
#pragma once

#include <functional>

#include "ops/random.h"
#include "ops/tensor.h"

namespace est::nn {

using Initializer = std::function<Tensor(const Shape& shape, DType dtype, ops::Generator&)>;

// fan_in and fan_out as Keras computes them: a dense kernel [in, out] has fan_in = in and
// fan_out = out; a conv kernel [kh, kw, in, out] multiplies both by the receptive field kh*kw.
struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};
Fans compute_fans(const Shape& shape);

Initializer zeros();
Initializer ones();
Initializer constant(double value);
// Uniform in [minval, maxval) (Keras RandomUniform defaults).
Initializer random_uniform(double minval = -0.05, double maxval = 0.05);
Initializer random_normal(double mean = 0.0, double stddev = 0.05);
// Normal redrawn outside two standard deviations (Keras TruncatedNormal defaults).
Initializer truncated_normal(double mean = 0.0, double stddev = 0.05);

enum class FanMode : uint8_t { kFanIn, kFanOut, kFanAvg };
enum class Distribution : uint8_t { kTruncatedNormal, kUntruncatedNormal, kUniform };
// Keras VarianceScaling: variance scale / fan. The truncated normal's stddev is divided by
// 0.87962566103423978 (the stddev of a unit normal truncated at two), so the drawn values have
// the requested variance.
Initializer variance_scaling(double scale = 1.0, FanMode mode = FanMode::kFanIn,
                             Distribution distribution = Distribution::kTruncatedNormal);

// Uniform in +-sqrt(6 / (fan_in + fan_out)): Keras's default for kernels.
Initializer glorot_uniform();
Initializer glorot_normal();
// Truncated normal with variance 2 / fan_in (VarianceScaling(2, fan_in, truncated_normal)).
Initializer he_normal();
Initializer he_uniform();

}  // namespace est::nn
