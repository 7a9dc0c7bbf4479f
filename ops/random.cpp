// The seeded generator (xoshiro256** seeded by splitmix64) and the random tensor ops.
//
// Checkpoint contract: state() is the four xoshiro words only. Generator::next_normal keeps the
// second Box-Muller value as a spare; set_state() drops any spare, so a restored generator
// continues from fresh pairs. The tensor ops below never use or leave a spare (they draw their
// normals in pairs from the uniform stream), so the four words saved between two tensor ops
// restore the exact same future tensors.
#include "ops/random.h"

#include <cmath>
#include <numbers>

#include "ops/cpu/checks.h"

namespace est::ops {
namespace {

uint64_t splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ULL;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Two independent standard normals from two uniforms (Box-Muller); u1 is taken in (0, 1] so
// that the logarithm is finite.
std::pair<double, double> normal_pair(Generator& generator) {
  double u1 = 1.0 - generator.next_double();
  double u2 = generator.next_double();
  double radius = std::sqrt(-2.0 * std::log(u1));
  double angle = 2.0 * std::numbers::pi * u2;
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

void require_finite(const char* op, const char* what, double value) {
  if (!std::isfinite(value))
    throw InvalidArgumentError(fmt::format("{}: {} must be finite, got {}", op, what, value));
}

// Fills a floating tensor with `draw()` values; `draw` returns a pair per call.
template <class Draw>
Tensor fill_pairs(const char* op, const Shape& shape, DType dtype, Draw draw) {
  Tensor out = Tensor::empty(shape, dtype);
  dispatch_float(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    T* data = out.data<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; i += 2) {
      auto [first, second] = draw();
      data[i] = static_cast<T>(first);
      if (i + 1 < n) data[i + 1] = static_cast<T>(second);
    }
  });
  return out;
}

}  // namespace

// splitmix64 never yields four zero words in a row, so every seed gives a valid state.
Generator::Generator(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& word : state_) word = splitmix64(x);
}

double Generator::next_normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  auto [first, second] = normal_pair(*this);
  spare_ = second;
  has_spare_ = true;
  return first;
}

void Generator::set_state(const std::array<uint64_t, 4>& state) {
  if (state == std::array<uint64_t, 4>{0, 0, 0, 0})
    throw InvalidArgumentError(
        "Generator::set_state: the all-zero state is not valid for xoshiro256** (it only ever "
        "produces zeros); restore a state saved from Generator::state()");
  state_ = state;
  has_spare_ = false;
  spare_ = 0.0;
}

Tensor random_uniform(const Shape& shape, double minval, double maxval, Generator& generator,
                      DType dtype) {
  require_finite("random_uniform", "minval", minval);
  require_finite("random_uniform", "maxval", maxval);
  if (is_integral(dtype)) {
    const int64_t low = static_cast<int64_t>(std::ceil(minval));
    const int64_t high = static_cast<int64_t>(std::ceil(maxval));  // exclusive
    if (high <= low)
      throw InvalidArgumentError(fmt::format(
          "random_uniform: integer range [{}, {}) is empty; need minval < maxval", minval, maxval));
    Tensor out = Tensor::empty(shape, dtype);
    const uint64_t range = static_cast<uint64_t>(high - low);
    cpu::dispatch_numeric(dtype, "random_uniform", [&](auto tag) {
      using T = decltype(tag);
      T* data = out.data<T>();
      const int64_t n = out.numel();
      for (int64_t i = 0; i < n; ++i)
        data[i] = static_cast<T>(low + static_cast<int64_t>(generator.next_u64() % range));
    });
    return out;
  }
  if (maxval < minval)
    throw InvalidArgumentError(fmt::format(
        "random_uniform: maxval {} is below minval {}; pass them in order", maxval, minval));
  Tensor out = Tensor::empty(shape, dtype);
  dispatch_float(dtype, "random_uniform", [&](auto tag) {
    using T = decltype(tag);
    T* data = out.data<T>();
    const T low = static_cast<T>(minval), high = static_cast<T>(maxval);
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      T u = std::is_same_v<T, float> ? static_cast<T>(generator.next_float())
                                     : static_cast<T>(generator.next_double());
      T v = low + (high - low) * u;
      data[i] = v < high || high == low ? v : std::nextafter(high, low);  // keep [min, max)
    }
  });
  return out;
}

Tensor random_normal(const Shape& shape, double mean, double stddev, Generator& generator,
                     DType dtype) {
  require_finite("random_normal", "mean", mean);
  require_finite("random_normal", "stddev", stddev);
  if (stddev < 0)
    throw InvalidArgumentError(fmt::format("random_normal: stddev must be >= 0, got {}", stddev));
  return fill_pairs("random_normal", shape, dtype, [&] {
    auto [a, b] = normal_pair(generator);
    return std::pair{mean + stddev * a, mean + stddev * b};
  });
}

Tensor truncated_normal(const Shape& shape, double mean, double stddev, Generator& generator,
                        DType dtype) {
  require_finite("truncated_normal", "mean", mean);
  require_finite("truncated_normal", "stddev", stddev);
  if (stddev < 0)
    throw InvalidArgumentError(
        fmt::format("truncated_normal: stddev must be >= 0, got {}", stddev));
  // Standard normals outside [-2, 2] are redrawn (about 4.6% of draws).
  auto next_within = [&, pending = 0.0, has_pending = false]() mutable {
    for (;;) {
      double z;
      if (has_pending) {
        z = pending;
        has_pending = false;
      } else {
        auto [a, b] = normal_pair(generator);
        z = a;
        pending = b;
        has_pending = true;
      }
      if (std::fabs(z) <= 2.0) return z;
    }
  };
  return fill_pairs("truncated_normal", shape, dtype, [&] {
    double a = next_within();
    double b = next_within();
    return std::pair{mean + stddev * a, mean + stddev * b};
  });
}

}  // namespace est::ops
