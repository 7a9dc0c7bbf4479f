// Initializers: Keras's fans, and the statistics of the drawn values against the Keras
// formulas (the sample mean and variance of 60,000+ draws are within a few percent).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/initializers.h"

using namespace est;
using namespace est::nn;

namespace {

struct Stats {
  double mean = 0, variance = 0, min = 0, max = 0;
};

Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) s.variance += (x - s.mean) * (x - s.mean);
  s.variance /= double(v.size());
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

}  // namespace

TEST_CASE("fans are computed as Keras computes them") {
  CHECK(compute_fans({}).fan_in == 1);
  CHECK(compute_fans({7}).fan_in == 7);
  CHECK(compute_fans({7}).fan_out == 7);
  CHECK(compute_fans({20, 30}).fan_in == 20);
  CHECK(compute_fans({20, 30}).fan_out == 30);
  // Conv kernel [kh, kw, in, out]: receptive field 3 * 5 = 15.
  CHECK(compute_fans({3, 5, 4, 8}).fan_in == 60);
  CHECK(compute_fans({3, 5, 4, 8}).fan_out == 120);
}

TEST_CASE("glorot_uniform: uniform in +-sqrt(6 / (fan_in + fan_out))") {
  ops::Generator generator(1);
  Shape shape{300, 200};
  Tensor w = glorot_uniform()(shape, DType::kF32, generator);
  CHECK(w.shape() == shape);
  CHECK(w.dtype() == DType::kF32);
  double limit = std::sqrt(6.0 / 500.0);
  Stats s = stats_of(w);
  CHECK(s.min >= -limit);
  CHECK(s.max <= limit);
  CHECK(s.min < -0.99 * limit);  // the whole range is used
  CHECK(s.max > 0.99 * limit);
  CHECK(std::abs(s.mean) < 0.01 * limit);
  CHECK(s.variance == doctest::Approx(limit * limit / 3).epsilon(0.03));  // 2 / (in + out)
}

TEST_CASE("glorot_uniform counts a conv kernel's receptive field") {
  ops::Generator generator(2);
  Tensor w = glorot_uniform()({3, 3, 32, 64}, DType::kF64, generator);
  double limit = std::sqrt(6.0 / (9 * 32 + 9 * 64));
  Stats s = stats_of(w);
  CHECK(s.max <= limit);
  CHECK(s.max > 0.98 * limit);
  CHECK(s.variance == doctest::Approx(2.0 / (9 * 32 + 9 * 64)).epsilon(0.05));
}

TEST_CASE("he_normal: truncated normal whose variance is 2 / fan_in") {
  ops::Generator generator(3);
  Tensor w = he_normal()({3, 3, 64, 128}, DType::kF32, generator);
  double fan_in = 3 * 3 * 64;
  double stddev = std::sqrt(2.0 / fan_in) / 0.87962566103423978;  // before truncation
  Stats s = stats_of(w);
  CHECK(s.max <= 2 * stddev + 1e-6);
  CHECK(s.min >= -2 * stddev - 1e-6);
  CHECK(std::abs(s.mean) < 0.01 * stddev);
  CHECK(s.variance == doctest::Approx(2.0 / fan_in).epsilon(0.03));
}

TEST_CASE("truncated_normal and random_normal have the stated moments") {
  ops::Generator generator(4);
  Stats t = stats_of(truncated_normal(1.0, 0.5)({100000}, DType::kF64, generator));
  CHECK(t.min >= 0.0 - 1e-9);  // mean - 2 stddev
  CHECK(t.max <= 2.0 + 1e-9);  // mean + 2 stddev
  CHECK(t.mean == doctest::Approx(1.0).epsilon(0.01));
  // Truncation at two stddevs leaves 0.8796^2 of the variance.
  CHECK(t.variance == doctest::Approx(0.25 * 0.77374).epsilon(0.03));
  Stats n = stats_of(random_normal(-2.0, 3.0)({100000}, DType::kF64, generator));
  CHECK(n.mean == doctest::Approx(-2.0).epsilon(0.02));
  CHECK(n.variance == doctest::Approx(9.0).epsilon(0.03));
}

TEST_CASE("random_uniform covers [minval, maxval)") {
  ops::Generator generator(5);
  Stats s = stats_of(random_uniform(2.0, 4.0)({50000}, DType::kF32, generator));
  CHECK(s.min >= 2.0);
  CHECK(s.max < 4.0);
  CHECK(s.mean == doctest::Approx(3.0).epsilon(0.01));
  CHECK(s.variance == doctest::Approx(4.0 / 12).epsilon(0.03));
  CHECK_THROWS_AS(random_uniform(1.0, 1.0), InvalidArgumentError);
}

TEST_CASE("zeros, ones and constant fill exactly, in the requested dtype") {
  ops::Generator generator(6);
  CHECK(zeros()({2, 2}, DType::kF64, generator).to_vector<double>() ==
        std::vector<double>{0, 0, 0, 0});
  CHECK(ones()({3}, DType::kF32, generator).to_vector<float>() == std::vector<float>{1, 1, 1});
  Tensor c = constant(2.5)({2}, DType::kF32, generator);
  CHECK(c.dtype() == DType::kF32);
  CHECK(c.to_vector<float>() == std::vector<float>{2.5f, 2.5f});
  CHECK(zeros()({}, DType::kI64, generator).item() == 0);
}

TEST_CASE("initializers are deterministic given the generator's seed") {
  ops::Generator a(9), b(9), c(10);
  Tensor x = glorot_uniform()({10, 10}, DType::kF32, a);
  Tensor y = glorot_uniform()({10, 10}, DType::kF32, b);
  Tensor z = glorot_uniform()({10, 10}, DType::kF32, c);
  CHECK(x.to_vector<float>() == y.to_vector<float>());
  CHECK(x.to_vector<float>() != z.to_vector<float>());
}

TEST_CASE("random initializers refuse integer variables") {
  ops::Generator generator(0);
  CHECK_THROWS_AS(glorot_uniform()({2, 2}, DType::kI32, generator), InvalidArgumentError);
  CHECK_THROWS_AS(he_normal()({2, 2}, DType::kI64, generator), InvalidArgumentError);
}
