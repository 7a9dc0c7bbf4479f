// Reference batch normalization: per-channel sums in double over the rows of a [rows, C] view,
// two passes for the variance (mean first) so large offsets do not cancel. The sums run over a
// fixed number of parts of the rows (cpu/parallel.h's fixed_parts, from the shape alone) whose
// partial sums are added in order, so the bits do not depend on the thread count; the oneDNN
// batch norm takes its training statistics and gradients from here for that reason.
#include "ops/cpu/batch_norm_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/parallel.h"
#include "ops/cpu/sum_in_order.h"

namespace est::ops::cpu {
namespace {

constexpr int64_t kGrain = int64_t{1} << 15;  // elements of x per part or task at least

int64_t rows_grain(int64_t channels) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(channels, 1));
}

// Sums over the rows: add_row(r, acc) adds row r's `width` terms into acc[0, width). Each fixed
// part of the rows sums into its own accumulators; the parts are added in order.
template <class AddRow>
std::vector<double> sum_rows(int64_t rows, int64_t channels, int64_t width, AddRow&& add_row) {
  const int64_t parts = fixed_parts(rows, rows_grain(channels));
  std::vector<double> partial(static_cast<size_t>(parts * width), 0.0);
  parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part)
      for (int64_t r = rows * part / parts; r < rows * (part + 1) / parts; ++r)
        add_row(r, partial.data() + part * width);
  });
  std::vector<double> total(static_cast<size_t>(width));
  sum_in_order<double>(
      parts, width, [&](int64_t part) { return partial.data() + part * width; },
      [&](int64_t i, double sum) { total[i] = sum; });
  return total;
}

// Calls row(r) for every row, rows split over the threads (each row's result is its own).
template <class Row>
void each_row(int64_t rows, int64_t channels, Row&& row) {
  parallel_for(rows, rows_grain(channels), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r);
  });
}

// x as [rows, channels] beside its per-channel mean, 1 / sqrt(variance + epsilon) and gamma
// (1 when undefined), in double: what the forward and backward passes share.
template <class T>
struct Normalization {
  Normalization(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& variance,
                double epsilon)
      : channels(mean.numel()),
        rows(channels ? x.numel() / channels : 0),
        px(x.data<T>()),
        pm(mean.data<T>()) {
    const int64_t n = variance.numel();
    const T* var = variance.data<T>();
    const T* g = gamma.defined() ? gamma.data<T>() : nullptr;
    inv_std.resize(static_cast<size_t>(n));
    scale.resize(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) {
      inv_std[c] = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
      scale[c] = g ? static_cast<double>(g[c]) : 1.0;
    }
  }

  // (x - mean) / sqrt(variance + epsilon) at row r, channel c.
  double xhat(int64_t r, int64_t c) const {
    return (static_cast<double>(px[r * channels + c]) - static_cast<double>(pm[c])) * inv_std[c];
  }

  int64_t channels, rows;
  const T* px;
  const T* pm;
  std::vector<double> inv_std, scale;
};

}  // namespace

void batch_norm_statistics_reference(const Tensor& x, Tensor& mean, Tensor& variance) {
  dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const int64_t channels = mean.numel(), rows = channels ? x.numel() / channels : 0;
    const T* px = x.data<T>();
    std::vector<double> sum = sum_rows(rows, channels, channels, [&](int64_t r, double* acc) {
      for (int64_t c = 0; c < channels; ++c) acc[c] += static_cast<double>(px[r * channels + c]);
    });
    for (int64_t c = 0; c < channels; ++c)
      sum[c] /= static_cast<double>(std::max<int64_t>(rows, 1));
    const std::vector<double> squares =
        sum_rows(rows, channels, channels, [&](int64_t r, double* acc) {
          for (int64_t c = 0; c < channels; ++c) {
            const double d = static_cast<double>(px[r * channels + c]) - sum[c];
            acc[c] += d * d;
          }
        });
    T* pm = mean.data<T>();
    T* pv = variance.data<T>();
    for (int64_t c = 0; c < channels; ++c) {
      pm[c] = static_cast<T>(sum[c]);
      pv[c] = static_cast<T>(squares[c] / static_cast<double>(std::max<int64_t>(rows, 1)));
    }
  });
}

void batch_norm_forward_reference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& variance, double epsilon,
                                  Tensor& y) {
  dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const Normalization<T> n(x, gamma, mean, variance, epsilon);
    const int64_t channels = n.channels;
    const T* pb = beta.defined() ? beta.data<T>() : nullptr;
    T* py = y.data<T>();
    each_row(n.rows, channels, [&](int64_t r) {
      for (int64_t c = 0; c < channels; ++c)
        py[r * channels + c] =
            static_cast<T>(n.xhat(r, c) * n.scale[c] + (pb ? static_cast<double>(pb[c]) : 0.0));
    });
  });
}

void batch_norm_backward_reference(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& variance, const Tensor& grad_y, double epsilon,
                                   bool training, Tensor* grad_x, Tensor* grad_gamma,
                                   Tensor* grad_beta) {
  dispatch_float(x.dtype(), "batch_norm gradient", [&](auto tag) {
    using T = decltype(tag);
    const Normalization<T> n(x, gamma, mean, variance, epsilon);
    const int64_t channels = n.channels, rows = n.rows;
    const std::vector<double>& inv_std = n.inv_std;
    const T* px = n.px;
    const T* pm = n.pm;
    const T* dy = grad_y.data<T>();
    // sums[c] = sum_dy = dL/dbeta, sums[C + c] = sum_dy_xhat = dL/dgamma.
    const std::vector<double> sums =
        sum_rows(rows, channels, 2 * channels, [&](int64_t r, double* acc) {
          for (int64_t c = 0; c < channels; ++c) {
            const double g = static_cast<double>(dy[r * channels + c]);
            const double xhat = n.xhat(r, c);
            acc[c] += g;
            acc[channels + c] += g * xhat;
          }
        });
    const double* sum_dy = sums.data();
    const double* sum_dy_xhat = sums.data() + channels;
    if (grad_gamma)
      for (int64_t c = 0; c < channels; ++c)
        grad_gamma->data<T>()[c] = static_cast<T>(sum_dy_xhat[c]);
    if (grad_beta)
      for (int64_t c = 0; c < channels; ++c) grad_beta->data<T>()[c] = static_cast<T>(sum_dy[c]);
    if (!grad_x) return;
    // dx = A g + B (x - mean) + C per channel, the coefficients in double, the pass in T (so it
    // vectorises): A = gamma inv_std; in training, B = -A inv_std sum_dy_xhat / rows and
    // C = -A sum_dy / rows (the gradient through the batch's own statistics), else 0.
    T* dx = grad_x->data<T>();
    const double inv_rows = 1.0 / static_cast<double>(std::max<int64_t>(rows, 1));
    std::vector<T> a(static_cast<size_t>(channels)), b(a.size()), shift(a.size());
    for (int64_t c = 0; c < channels; ++c) {
      const double scaled = n.scale[c] * inv_std[c];
      a[c] = static_cast<T>(scaled);
      b[c] = training ? static_cast<T>(-scaled * inv_std[c] * sum_dy_xhat[c] * inv_rows) : T(0);
      shift[c] = training ? static_cast<T>(-scaled * sum_dy[c] * inv_rows) : T(0);
    }
    const T* pa = a.data();
    const T* pb = b.data();
    const T* ps = shift.data();
    each_row(rows, channels, [&](int64_t r) {
      const T* g = dy + r * channels;
      const T* xr = px + r * channels;
      T* out = dx + r * channels;
      for (int64_t c = 0; c < channels; ++c)
        out[c] = pa[c] * g[c] + pb[c] * (xr[c] - pm[c]) + ps[c];
    });
  });
}

}  // namespace est::ops::cpu
