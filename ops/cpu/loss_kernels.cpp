// Reference kernels of softmax, the fused cross-entropies and dropout's mask.
//
// The softmax cross-entropies make one pass per row that yields the softmax and the
// log-sum-exp (max subtracted, so logits of 1e4 stay finite); the loss comes from the
// log-sum-exp, and the softmax is kept for the backward pass, where the gradient to the logits
// is (softmax - labels) * upstream with no further exp. Class ids are checked before any
// arithmetic. The dropout mask draws from the caller's host generator, element by element, so
// a seed gives the same mask whatever the thread count.
#include <cmath>

#include "ops/axis_layout.h"
#include "ops/cpu/checks.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/softmax.h"

namespace est::ops::cpu {
namespace {

// Softmax and log-sum-exp over the last axis of logits viewed as [rows, classes].
void softmax_rows(const Tensor& logits, Tensor& probs, Tensor& lse) {
  const int64_t rows = lse.numel();
  const int64_t classes = rows == 0 ? 0 : logits.numel() / rows;
  dispatch_float(logits.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_and_logsumexp(logits.data<T>(), probs.data<T>(), lse.data<T>(), rows, classes);
  });
}

template <class T>
T sigmoid_of(T v) {
  if (v >= 0) return T(1) / (T(1) + std::exp(-v));
  T e = std::exp(v);
  return e / (T(1) + e);
}

}  // namespace

void dropout_mask(double rate, Generator& generator, Tensor& mask) {
  dispatch_float(mask.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / (1.0 - rate));
    T* m = mask.data<T>();
    const int64_t n = mask.numel();
    for (int64_t i = 0; i < n; ++i) m[i] = generator.next_double() >= rate ? scale : T(0);
  });
}

void softmax(const Tensor& x, int axis, bool log, Tensor& y) {
  const AxisLayout layout = axis_layout(x.shape(), axis);
  dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_forward(x.data<T>(), y.data<T>(), layout.outer, layout.size, layout.inner, log);
  });
}

void softmax_gradient(const Tensor& grad, const Tensor& y, int axis, bool log, Tensor& dx) {
  const AxisLayout layout = axis_layout(y.shape(), axis);
  dispatch_float(y.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_backward(grad.data<T>(), y.data<T>(), dx.data<T>(), layout.outer, layout.size,
                     layout.inner, log);
  });
}

void sparse_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs) {
  constexpr const char* kName = "sparse_softmax_cross_entropy_with_logits";
  const int64_t classes = logits.shape().back();
  const int64_t rows = labels.numel();
  const std::vector<int64_t> ids = labels.to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= classes)
      throw InvalidArgumentError(fmt::format(
          "{}: label {} at index {} is outside [0, {}): the logits have {} classes; check the "
          "labels or the number of output units",
          kName, ids[i], i, classes, classes));
  Tensor lse = Tensor::empty({rows}, logits.dtype());
  softmax_rows(logits, probs, lse);
  dispatch_float(logits.dtype(), kName, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* l = lse.data<T>();
    T* out = loss.data<T>();
    for (int64_t n = 0; n < rows; ++n) out[n] = l[n] - x[n * classes + ids[static_cast<size_t>(n)]];
  });
}

void sparse_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& probs,
                                   Tensor& dlogits) {
  const std::vector<int64_t> ids = labels.to_vector<int64_t>();
  const int64_t classes = probs.shape().back();
  dispatch_float(probs.dtype(), "sparse_softmax_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* p = probs.data<T>();
    const T* g = grad.data<T>();
    T* d = dlogits.data<T>();
    parallel_for(static_cast<int64_t>(ids.size()),
                 std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(classes, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t n = begin; n < end; ++n) {
                     for (int64_t c = 0; c < classes; ++c)
                       d[n * classes + c] = g[n] * p[n * classes + c];
                     d[n * classes + ids[static_cast<size_t>(n)]] -= g[n];
                   }
                 });
  });
}

void cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs,
                   Tensor& lse) {
  softmax_rows(logits, probs, lse);
  const int64_t rows = lse.numel();
  const int64_t classes = logits.rank() == 0 ? 0 : logits.shape().back();
  dispatch_float(logits.dtype(), "softmax_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* z = labels.data<T>();
    const T* l = lse.data<T>();
    T* out = loss.data<T>();
    for (int64_t n = 0; n < rows; ++n) {
      T total = 0;
      for (int64_t c = 0; c < classes; ++c)
        total += z[n * classes + c] * (l[n] - x[n * classes + c]);
      out[n] = total;
    }
  });
}

// loss = sum_c z_c (lse - x_c). d/dx_c = p_c * sum(z) - z_c (sum(z) is 1 for a distribution,
// kept exact otherwise); d/dz_c = lse - x_c = -log_softmax_c.
void cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                            const Tensor& probs, const Tensor& lse, Tensor* dlabels,
                            Tensor* dlogits) {
  const int64_t rows = lse.numel();
  const int64_t classes = logits.shape().back();
  dispatch_float(labels.dtype(), "softmax_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* p = probs.data<T>();
    const T* l = lse.data<T>();
    const T* xs = logits.data<T>();
    const T* zs = labels.data<T>();
    const T* g = grad.data<T>();
    for (int64_t n = 0; n < rows; ++n) {
      const int64_t row = n * classes;
      if (dlabels != nullptr) {
        T* d = dlabels->data<T>() + row;
        for (int64_t c = 0; c < classes; ++c) d[c] = g[n] * (l[n] - xs[row + c]);
      }
      if (dlogits != nullptr) {
        T mass = 0;
        for (int64_t c = 0; c < classes; ++c) mass += zs[row + c];
        T* d = dlogits->data<T>() + row;
        for (int64_t c = 0; c < classes; ++c) d[c] = g[n] * (p[row + c] * mass - zs[row + c]);
      }
    }
  });
}

// Elementwise max(x, 0) - x * z + log(1 + exp(-|x|)).
void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss) {
  dispatch_float(logits.dtype(), "sigmoid_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    zip_map(labels.data<T>(), logits.data<T>(), loss.data<T>(), loss.numel(), [](T z, T x) {
      return std::max(x, T(0)) - x * z + std::log1p(std::exp(-std::abs(x)));
    });
  });
}

void sigmoid_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                                    Tensor* dlabels, Tensor* dlogits) {
  dispatch_float(logits.dtype(), "sigmoid_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = logits.numel();
    if (dlabels != nullptr)
      zip_map(grad.data<T>(), logits.data<T>(), dlabels->data<T>(), n,
              [](T g, T v) { return -g * v; });
    if (dlogits != nullptr)
      ternary_map(grad.data<T>(), logits.shape(), logits.data<T>(), logits.shape(),
                  labels.data<T>(), logits.shape(), dlogits->data<T>(), logits.shape(),
                  [](T g, T x, T z) { return g * (sigmoid_of(x) - z); });
  });
}

}  // namespace est::ops::cpu
