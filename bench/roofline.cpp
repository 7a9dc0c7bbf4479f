// The roofline probe of bench/roofline.h: sgemm and triad rates, and the tutorial CNN's counts.
#include "bench/roofline.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#if EST_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#else
// Eigen 3.4's AVX-512 headers trip GCC 12's warnings (see ops/cpu/matmul_reference.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#endif

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best seconds of one n x n x n product (C = A * B, row-major), after one untimed warm-up.
double best_sgemm_seconds(int64_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    auto start = Clock::now();
#if EST_HAVE_ONEDNN
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
#else
    using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> am(a.data(), n, n), bm(b.data(), n, n);
    Eigen::Map<Matrix> cm(c.data(), n, n);
    cm.noalias() = am * bm;
#endif
    if (r > 0) best = std::min(best, seconds(start));
  }
  return best;
}

// Best seconds of a[i] = b[i] + s * c[i] over `n` floats per array, after one untimed pass (which
// also places the pages on the threads that touch them).
double best_triad_seconds(int64_t n, int threads, int reps) {
  std::vector<float> a(n), b(n), c(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    auto start = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    if (r > 0) best = std::min(best, seconds(start));
  }
  return best;
}

}  // namespace

Roofline measure_roofline(int threads, int64_t n, int64_t triad_elements, int reps) {
  omp_set_num_threads(threads);
#if !EST_HAVE_ONEDNN
  Eigen::setNbThreads(threads);
#endif
  Roofline roofline;
  roofline.gemm = EST_HAVE_ONEDNN ? "onednn_sgemm" : "eigen";
  roofline.gflops = 2.0 * n * n * n / best_sgemm_seconds(n, reps) / 1e9;
  roofline.gbytes_s =
      3.0 * 4 * triad_elements / best_triad_seconds(triad_elements, threads, reps) / 1e9;
  return roofline;
}

// Layer shapes of examples/cnn_model.h on 28x28x1 images: conv 3x3x1 -> 32 (valid, 26x26x32),
// max pool 2 (13x13x32 = 5408), dense 5408 -> 64, dense 64 -> 10.
//
// FLOPs (2 per multiply-add): forward conv 26*26*32*9*2, dense 5408*64*2 and 64*10*2, about
// 1.08 MFLOP per example. Training: each dense layer 3x forward (output, input gradient, weight
// gradient); the conv 2x (output and weight gradient: the images need no gradient); 2.86 MFLOP
// per example. Pooling, ReLU, softmax and SGD are a few element-wise FLOPs and not counted.
//
// Bytes (float32), a simple model of traffic to memory: forward reads the images once and writes
// and reads once each activation (conv, pool, dense, dense outputs: 27114 floats per example);
// backward writes and reads once the gradient of each of those activations; the parameters
// (347146 floats) are read once forward, and training also writes and reads their gradient and
// reads and writes them in the SGD update (5 passes over the parameters in all). Caches may hold
// a small batch's activations, so this can overstate a small batch's traffic.
StepCost tutorial_cnn_cost(int64_t batch, bool training) {
  const double conv = 26.0 * 26 * 32 * 9 * 2, dense1 = 5408.0 * 64 * 2, dense2 = 64.0 * 10 * 2;
  const double images = 28 * 28, activations = 26 * 26 * 32 + 5408 + 64 + 10;
  const double parameters = (9 * 32 + 32) + (5408 * 64 + 64) + (64 * 10 + 10);
  StepCost cost;
  if (training) {
    cost.flops = batch * (2 * conv + 3 * (dense1 + dense2));
    cost.bytes = 4 * (batch * (images + 4 * activations) + 5 * parameters);
  } else {
    cost.flops = batch * (conv + dense1 + dense2);
    cost.bytes = 4 * (batch * (images + 2 * activations) + parameters);
  }
  return cost;
}

double roofline_fraction(const Roofline& roofline, const StepCost& cost, double step_seconds) {
  double bound =
      std::max(cost.flops / (roofline.gflops * 1e9), cost.bytes / (roofline.gbytes_s * 1e9));
  return bound / step_seconds;
}

const char* roofline_limit(const Roofline& roofline, const StepCost& cost) {
  return cost.flops / roofline.gflops >= cost.bytes / roofline.gbytes_s ? "flops" : "bytes";
}

}  // namespace bench
