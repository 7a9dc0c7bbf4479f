// Reference batch normalization: per-channel sums in double over the rows of a [rows, C] view,
// two passes for the variance (mean first) so large offsets do not cancel.
#include "ops/cpu/batch_norm_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace est::ops::cpu {
namespace {

// Per-channel 1 / sqrt(variance + epsilon), and gamma (1 when undefined), in double.
template <class T>
void scale_factors(const Tensor& gamma, const Tensor& variance, double epsilon,
                   std::vector<double>& inv_std, std::vector<double>& scale) {
  const int64_t channels = variance.numel();
  const T* var = variance.data<T>();
  const T* g = gamma.defined() ? gamma.data<T>() : nullptr;
  inv_std.resize(static_cast<size_t>(channels));
  scale.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    inv_std[c] = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
    scale[c] = g ? static_cast<double>(g[c]) : 1.0;
  }
}

}  // namespace

void batch_norm_statistics_reference(const Tensor& x, Tensor& mean, Tensor& variance) {
  dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const int64_t channels = mean.numel(), rows = channels ? x.numel() / channels : 0;
    const T* px = x.data<T>();
    std::vector<double> sum(static_cast<size_t>(channels), 0.0), squares(sum);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) sum[c] += static_cast<double>(px[r * channels + c]);
    for (int64_t c = 0; c < channels; ++c)
      sum[c] /= static_cast<double>(std::max<int64_t>(rows, 1));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) {
        const double d = static_cast<double>(px[r * channels + c]) - sum[c];
        squares[c] += d * d;
      }
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
    const int64_t channels = mean.numel(), rows = channels ? x.numel() / channels : 0;
    std::vector<double> inv_std, scale;
    scale_factors<T>(gamma, variance, epsilon, inv_std, scale);
    const T* px = x.data<T>();
    const T* pm = mean.data<T>();
    const T* pb = beta.defined() ? beta.data<T>() : nullptr;
    T* py = y.data<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) {
        const double normalized =
            (static_cast<double>(px[r * channels + c]) - static_cast<double>(pm[c])) * inv_std[c];
        py[r * channels + c] =
            static_cast<T>(normalized * scale[c] + (pb ? static_cast<double>(pb[c]) : 0.0));
      }
  });
}

void batch_norm_backward_reference(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& variance, const Tensor& grad_y, double epsilon,
                                   bool training, Tensor* grad_x, Tensor* grad_gamma,
                                   Tensor* grad_beta) {
  dispatch_float(x.dtype(), "batch_norm gradient", [&](auto tag) {
    using T = decltype(tag);
    const int64_t channels = mean.numel(), rows = channels ? x.numel() / channels : 0;
    std::vector<double> inv_std, scale;
    scale_factors<T>(gamma, variance, epsilon, inv_std, scale);
    const T* px = x.data<T>();
    const T* pm = mean.data<T>();
    const T* dy = grad_y.data<T>();
    // sum_dy = dL/dbeta, sum_dy_xhat = dL/dgamma.
    std::vector<double> sum_dy(static_cast<size_t>(channels), 0.0), sum_dy_xhat(sum_dy);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) {
        const double g = static_cast<double>(dy[r * channels + c]);
        const double xhat =
            (static_cast<double>(px[r * channels + c]) - static_cast<double>(pm[c])) * inv_std[c];
        sum_dy[c] += g;
        sum_dy_xhat[c] += g * xhat;
      }
    if (grad_gamma)
      for (int64_t c = 0; c < channels; ++c)
        grad_gamma->data<T>()[c] = static_cast<T>(sum_dy_xhat[c]);
    if (grad_beta)
      for (int64_t c = 0; c < channels; ++c) grad_beta->data<T>()[c] = static_cast<T>(sum_dy[c]);
    if (!grad_x) return;
    T* dx = grad_x->data<T>();
    const double inv_rows = 1.0 / static_cast<double>(std::max<int64_t>(rows, 1));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) {
        const double g = static_cast<double>(dy[r * channels + c]);
        double value = g;
        if (training) {
          const double xhat =
              (static_cast<double>(px[r * channels + c]) - static_cast<double>(pm[c])) * inv_std[c];
          value = g - sum_dy[c] * inv_rows - xhat * sum_dy_xhat[c] * inv_rows;
        }
        dx[r * channels + c] = static_cast<T>(scale[c] * inv_std[c] * value);
      }
  });
}

}  // namespace est::ops::cpu
