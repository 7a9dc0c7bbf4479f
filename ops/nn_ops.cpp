// The fused cross-entropies and dropout.
//
// The softmax cross-entropies make one pass per row that yields the softmax and the
// log-sum-exp (max subtracted, so logits of 1e4 stay finite); the loss comes from the
// log-sum-exp, and the softmax is kept, detached, for the backward pass, where the gradient to
// the logits is (softmax - labels) * upstream with no further exp. Class ids are checked before
// any arithmetic. softmax/log_softmax themselves are in softmax.cpp.
#include "ops/nn_ops.h"

#include <cmath>

#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/softmax.h"
#include "ops/math.h"

namespace est::ops {
namespace {

// Softmax and log-sum-exp over the last axis of floating logits viewed as [rows, classes]
// (reference kernel: the losses are not routed to oneDNN, so every backend gives the same loss).
struct SoftmaxRows {
  Tensor probs;  // [rows, classes], the logits' shape
  Tensor lse;    // [rows]
};

SoftmaxRows softmax_rows(const Tensor& logits, int64_t rows, int64_t classes) {
  SoftmaxRows out{Tensor::empty(logits.shape(), logits.dtype()),
                  Tensor::empty({rows}, logits.dtype())};
  dispatch_float(logits.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    cpu::softmax_and_logsumexp(logits.data<T>(), out.probs.data<T>(), out.lse.data<T>(), rows,
                               classes);
  });
  return out;
}

}  // namespace

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "sparse_softmax_cross_entropy_with_logits";
  cpu::require_cpu(kName, labels);
  cpu::require_cpu(kName, logits);
  cpu::require_index_dtype(kName, "labels", labels);
  cpu::require_floating(kName, logits);
  if (logits.rank() < 1 ||
      Shape(logits.shape().begin(), logits.shape().end() - 1) != labels.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; labels are class ids with the "
        "logits' shape minus the class axis (e.g. [N] for [N, C])",
        kName, shape_str(labels.shape()), shape_str(logits.shape())));
  const int64_t classes = logits.shape().back();
  const int64_t rows = labels.numel();
  std::vector<int64_t> ids = labels.to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= classes)
      throw InvalidArgumentError(fmt::format(
          "{}: label {} at index {} is outside [0, {}): the logits have {} classes; check the "
          "labels or the number of output units",
          kName, ids[i], i, classes, classes));
  SoftmaxRows softmax = softmax_rows(logits, rows, classes);
  Tensor loss = Tensor::empty(labels.shape(), logits.dtype());
  dispatch_float(logits.dtype(), kName, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* lse = softmax.lse.data<T>();
    T* out = loss.data<T>();
    for (int64_t n = 0; n < rows; ++n)
      out[n] = lse[n] - x[n * classes + ids[static_cast<size_t>(n)]];
  });
  if (!needs_recording({&logits})) return loss;
  return record(
      loss, kName, {labels, logits},
      [ids = std::move(ids), probs = softmax.probs, classes](
          const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
        Tensor dlogits = Tensor::empty(probs.shape(), probs.dtype());
        dispatch_float(probs.dtype(), "sparse_softmax_cross_entropy_with_logits", [&](auto tag) {
          using T = decltype(tag);
          const T* p = probs.data<T>();
          const T* g = grad.data<T>();
          T* d = dlogits.data<T>();
          cpu::parallel_for(
              static_cast<int64_t>(ids.size()),
              std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(classes, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t n = begin; n < end; ++n) {
                  for (int64_t c = 0; c < classes; ++c)
                    d[n * classes + c] = g[n] * p[n * classes + c];
                  d[n * classes + ids[static_cast<size_t>(n)]] -= g[n];
                }
              });
        });
        return {Tensor(), dlogits};
      });
}

// loss = sum_c z_c (lse - x_c). d/dx_c = p_c * sum(z) - z_c (sum(z) is 1 for a distribution,
// kept exact otherwise); d/dz_c = lse - x_c = -log_softmax_c.
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "softmax_cross_entropy_with_logits";
  cpu::require_cpu(kName, labels);
  cpu::require_cpu(kName, logits);
  cpu::require_floating(kName, logits);
  cpu::require_same_dtype(kName, labels, logits);
  if (logits.rank() < 1 || labels.shape() != logits.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; labels are probabilities of "
        "the logits' shape (use sparse_softmax_cross_entropy_with_logits for class ids)",
        kName, shape_str(labels.shape()), shape_str(logits.shape())));
  const int64_t classes = logits.shape().back();
  Shape loss_shape(logits.shape().begin(), logits.shape().end() - 1);
  const int64_t rows = num_elements(loss_shape);  // with zero classes, every loss is 0
  SoftmaxRows softmax = softmax_rows(logits, rows, classes);
  Tensor loss = Tensor::empty(loss_shape, logits.dtype());
  dispatch_float(logits.dtype(), kName, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* z = labels.data<T>();
    const T* lse = softmax.lse.data<T>();
    T* out = loss.data<T>();
    for (int64_t n = 0; n < rows; ++n) {
      T total = 0;
      for (int64_t c = 0; c < classes; ++c)
        total += z[n * classes + c] * (lse[n] - x[n * classes + c]);
      out[n] = total;
    }
  });
  if (!needs_recording({&labels, &logits})) return loss;
  return record(loss, kName, {labels, logits},
                [z = labels.detach(), x = logits.detach(), softmax, rows, classes](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  Tensor dlabels, dlogits;
                  if (needs[0]) dlabels = Tensor::empty(z.shape(), z.dtype());
                  if (needs[1]) dlogits = Tensor::empty(z.shape(), z.dtype());
                  dispatch_float(z.dtype(), "softmax_cross_entropy_with_logits", [&](auto tag) {
                    using T = decltype(tag);
                    const T* p = softmax.probs.data<T>();
                    const T* lse = softmax.lse.data<T>();
                    const T* xs = x.data<T>();
                    const T* zs = z.data<T>();
                    const T* g = grad.data<T>();
                    for (int64_t n = 0; n < rows; ++n) {
                      const int64_t row = n * classes;
                      if (needs[0]) {
                        T* d = dlabels.data<T>() + row;
                        for (int64_t c = 0; c < classes; ++c) d[c] = g[n] * (lse[n] - xs[row + c]);
                      }
                      if (needs[1]) {
                        T mass = 0;
                        for (int64_t c = 0; c < classes; ++c) mass += zs[row + c];
                        T* d = dlogits.data<T>() + row;
                        for (int64_t c = 0; c < classes; ++c)
                          d[c] = g[n] * (p[row + c] * mass - zs[row + c]);
                      }
                    }
                  });
                  return {dlabels, dlogits};
                });
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* kName = "sigmoid_cross_entropy_with_logits";
  cpu::require_cpu(kName, labels);
  cpu::require_cpu(kName, logits);
  cpu::require_floating(kName, logits);
  cpu::require_same_dtype(kName, labels, logits);
  if (labels.shape() != logits.shape())
    throw InvalidArgumentError(fmt::format(
        "{}: labels of shape {} do not match logits of shape {}; they must have one shape", kName,
        shape_str(labels.shape()), shape_str(logits.shape())));
  Tensor loss = Tensor::empty(logits.shape(), logits.dtype());
  dispatch_float(logits.dtype(), kName, [&](auto tag) {
    using T = decltype(tag);
    cpu::zip_map(labels.data<T>(), logits.data<T>(), loss.data<T>(), loss.numel(), [](T z, T x) {
      return std::max(x, T(0)) - x * z + std::log1p(std::exp(-std::abs(x)));
    });
  });
  if (!needs_recording({&labels, &logits})) return loss;
  return record(loss, kName, {labels, logits},
                [z = labels.detach(), x = logits.detach()](
                    const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  Tensor dlabels, dlogits;
                  dispatch_float(x.dtype(), "sigmoid_cross_entropy_with_logits", [&](auto tag) {
                    using T = decltype(tag);
                    if (needs[0]) {
                      dlabels = Tensor::empty(x.shape(), x.dtype());
                      cpu::zip_map(grad.data<T>(), x.data<T>(), dlabels.data<T>(), x.numel(),
                                   [](T g, T v) { return -g * v; });
                    }
                    if (needs[1]) {
                      Tensor p = sigmoid(x);
                      dlogits = Tensor::empty(x.shape(), x.dtype());
                      cpu::ternary_map(grad.data<T>(), x.shape(), p.data<T>(), x.shape(),
                                       z.data<T>(), x.shape(), dlogits.data<T>(), x.shape(),
                                       [](T g, T s, T label) { return g * (s - label); });
                    }
                  });
                  return {dlabels, dlogits};
                });
}

Tensor dropout(const Tensor& x, double rate, Generator& generator) {
  cpu::require_cpu("dropout", x);
  cpu::require_floating("dropout", x);
  if (!(rate >= 0.0 && rate < 1.0))
    throw InvalidArgumentError(fmt::format(
        "dropout: rate must be in [0, 1), got {}; it is the fraction of elements dropped", rate));
  if (rate == 0.0) return x;
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / (1.0 - rate));
    T* m = mask.data<T>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) m[i] = generator.next_double() >= rate ? scale : T(0);
  });
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(x, mask);
  }
  if (!needs_recording({&x})) return out;
  return record(out, "dropout", {x},
                [mask](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {mul(grad, mask)};
                });
}

}  // namespace est::ops
