// Learning-rate schedules: closed-form functions of the global step.
#include "nn/schedules.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "ops/error.h"

namespace est::nn::optim {
namespace {

void check_rate(double value, std::string_view where) {
  if (!std::isfinite(value) || value < 0)
    throw InvalidArgumentError(fmt::format(
        "{}: a learning rate must be a finite non-negative number, got {}", where, value));
}

}  // namespace

LearningRate::LearningRate(double value) : value_(value) { check_rate(value, "LearningRate"); }

double LearningRate::at(int64_t global_step) const {
  if (!schedule_) return value_;
  double value = schedule_(global_step);
  if (!std::isfinite(value) || value < 0)
    throw InvalidArgumentError(fmt::format(
        "the learning-rate schedule returned {} at global step {}; it must be finite and "
        "non-negative",
        value, global_step));
  return value;
}

LearningRate exponential_decay(double learning_rate, int64_t decay_steps, double decay_rate,
                               bool staircase) {
  if (decay_steps <= 0)
    throw InvalidArgumentError(
        fmt::format("exponential_decay: decay_steps must be positive, got {}", decay_steps));
  if (!(decay_rate > 0))
    throw InvalidArgumentError(
        fmt::format("exponential_decay: decay_rate must be positive, got {}", decay_rate));
  check_rate(learning_rate, "exponential_decay");
  return [=](int64_t step) {
    double exponent = double(step) / double(decay_steps);
    if (staircase) exponent = std::floor(exponent);
    return learning_rate * std::pow(decay_rate, exponent);
  };
}

LearningRate piecewise_constant(std::vector<int64_t> boundaries, std::vector<double> values) {
  if (values.size() != boundaries.size() + 1)
    throw InvalidArgumentError(
        fmt::format("piecewise_constant: {} boundaries need {} values, got {}", boundaries.size(),
                    boundaries.size() + 1, values.size()));
  if (!std::is_sorted(boundaries.begin(), boundaries.end()) ||
      std::adjacent_find(boundaries.begin(), boundaries.end()) != boundaries.end())
    throw InvalidArgumentError("piecewise_constant: boundaries must be strictly increasing");
  for (double v : values) check_rate(v, "piecewise_constant");
  return [boundaries = std::move(boundaries), values = std::move(values)](int64_t step) {
    // The first boundary >= step: its index is the index of the value in force.
    auto it = std::lower_bound(boundaries.begin(), boundaries.end(), step);
    return values[static_cast<size_t>(it - boundaries.begin())];
  };
}

}  // namespace est::nn::optim
