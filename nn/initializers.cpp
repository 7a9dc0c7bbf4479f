// Initializers: Keras's fan computation and variance scaling, drawn through ops/random.h.
#include "nn/initializers.h"

#include <cmath>

#include <fmt/format.h>

namespace est::nn {
namespace {

// Stddev of a standard normal truncated to [-2, 2].
constexpr double kTruncatedStddev = 0.87962566103423978;

void check_floating(DType dtype, const char* initializer) {
  if (!is_floating(dtype))
    throw InvalidArgumentError(
        fmt::format("{} initializer: expected a float32 or float64 "
                    "variable, got {}; use zeros() or constant() for "
                    "integer variables",
                    initializer, dtype_name(dtype)));
}

}  // namespace

Fans compute_fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {double(shape[0]), double(shape[0])};
  if (shape.size() == 2) return {double(shape[0]), double(shape[1])};
  double receptive_field = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) receptive_field *= double(shape[i]);
  return {double(shape[shape.size() - 2]) * receptive_field,
          double(shape[shape.size() - 1]) * receptive_field};
}

Initializer zeros() {
  return
      [](const Shape& shape, DType dtype, ops::Generator&) { return Tensor::zeros(shape, dtype); };
}

Initializer ones() {
  return
      [](const Shape& shape, DType dtype, ops::Generator&) { return Tensor::ones(shape, dtype); };
}

Initializer constant(double value) {
  return [value](const Shape& shape, DType dtype, ops::Generator&) {
    return Tensor::full(shape, value, dtype);
  };
}

Initializer random_uniform(double minval, double maxval) {
  if (!(minval < maxval))
    throw InvalidArgumentError(fmt::format(
        "random_uniform initializer: minval {} must be below maxval {}", minval, maxval));
  return [=](const Shape& shape, DType dtype, ops::Generator& generator) {
    check_floating(dtype, "random_uniform");
    return ops::random_uniform(shape, minval, maxval, generator, dtype);
  };
}

Initializer random_normal(double mean, double stddev) {
  if (!(stddev >= 0))
    throw InvalidArgumentError(
        fmt::format("random_normal initializer: stddev {} is negative", stddev));
  return [=](const Shape& shape, DType dtype, ops::Generator& generator) {
    check_floating(dtype, "random_normal");
    return ops::random_normal(shape, mean, stddev, generator, dtype);
  };
}

Initializer truncated_normal(double mean, double stddev) {
  if (!(stddev >= 0))
    throw InvalidArgumentError(
        fmt::format("truncated_normal initializer: stddev {} is negative", stddev));
  return [=](const Shape& shape, DType dtype, ops::Generator& generator) {
    check_floating(dtype, "truncated_normal");
    return ops::truncated_normal(shape, mean, stddev, generator, dtype);
  };
}

Initializer variance_scaling(double scale, FanMode mode, Distribution distribution) {
  if (!(scale > 0))
    throw InvalidArgumentError(fmt::format("variance_scaling: scale {} must be positive", scale));
  return [=](const Shape& shape, DType dtype, ops::Generator& generator) {
    check_floating(dtype, "variance_scaling");
    Fans fans = compute_fans(shape);
    double fan = mode == FanMode::kFanIn    ? fans.fan_in
                 : mode == FanMode::kFanOut ? fans.fan_out
                                            : (fans.fan_in + fans.fan_out) / 2;
    double variance = scale / std::max(1.0, fan);
    switch (distribution) {
      case Distribution::kTruncatedNormal:
        return ops::truncated_normal(shape, 0.0, std::sqrt(variance) / kTruncatedStddev, generator,
                                     dtype);
      case Distribution::kUntruncatedNormal:
        return ops::random_normal(shape, 0.0, std::sqrt(variance), generator, dtype);
      case Distribution::kUniform: {
        double limit = std::sqrt(3.0 * variance);
        return ops::random_uniform(shape, -limit, limit, generator, dtype);
      }
    }
    throw InternalError("variance_scaling: unknown distribution");
  };
}

Initializer glorot_uniform() {
  return variance_scaling(1.0, FanMode::kFanAvg, Distribution::kUniform);
}

Initializer glorot_normal() {
  return variance_scaling(1.0, FanMode::kFanAvg, Distribution::kTruncatedNormal);
}

Initializer he_normal() {
  return variance_scaling(2.0, FanMode::kFanIn, Distribution::kTruncatedNormal);
}

Initializer he_uniform() { return variance_scaling(2.0, FanMode::kFanIn, Distribution::kUniform); }

}  // namespace est::nn
