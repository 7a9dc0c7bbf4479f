// Reference softmax kernels over one axis of a tensor viewed as [outer, classes, inner].
//
// The max of each row is subtracted before exponentiating, so logits of 1e4 neither overflow
// nor lose the small probabilities; the log form is computed as x - max - log(sum) rather than
// log(softmax), which keeps it finite where a probability underflows to zero. The fused
// cross-entropies reuse these kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/cpu/parallel.h"

namespace est::ops::cpu {

// out = softmax(in) (or log_softmax when `log`) along the middle axis.
template <class T>
void softmax_forward(const T* in, T* out, int64_t outer, int64_t classes, int64_t inner, bool log) {
  const int64_t rows = outer * inner;
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(classes, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t base = (row / inner) * classes * inner + row % inner;
                   const T* x = in + base;
                   T* y = out + base;
                   T max_value = -std::numeric_limits<T>::infinity();
                   for (int64_t c = 0; c < classes; ++c)
                     max_value = std::max(max_value, x[c * inner]);
                   T total = 0;
                   for (int64_t c = 0; c < classes; ++c) {
                     T e = std::exp(x[c * inner] - max_value);
                     y[c * inner] = e;
                     total += e;
                   }
                   if (log) {
                     const T shift = max_value + std::log(total);
                     for (int64_t c = 0; c < classes; ++c) y[c * inner] = x[c * inner] - shift;
                   } else {
                     const T scale = T(1) / total;
                     for (int64_t c = 0; c < classes; ++c) y[c * inner] *= scale;
                   }
                 }
               });
}

// For each row of in [rows, classes]: the softmax into probs [rows, classes] and the
// log-sum-exp into lse [rows], with one exp per element. The fused cross-entropies take their
// losses from lse (exact even where a probability underflows) and their gradients from probs.
template <class T>
void softmax_and_logsumexp(const T* in, T* probs, T* lse, int64_t rows, int64_t classes) {
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(classes, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const T* x = in + row * classes;
                   T* p = probs + row * classes;
                   T max_value = -std::numeric_limits<T>::infinity();
                   for (int64_t c = 0; c < classes; ++c) max_value = std::max(max_value, x[c]);
                   T total = 0;
                   for (int64_t c = 0; c < classes; ++c) {
                     p[c] = std::exp(x[c] - max_value);
                     total += p[c];
                   }
                   const T scale = T(1) / total;
                   for (int64_t c = 0; c < classes; ++c) p[c] *= scale;
                   lse[row] = max_value + std::log(total);
                 }
               });
}

// Gradient from the forward output y: softmax: dx = y * (g - sum(g * y));
// log_softmax: dx = g - exp(y) * sum(g).
template <class T>
void softmax_backward(const T* grad, const T* y, T* dx, int64_t outer, int64_t classes,
                      int64_t inner, bool log) {
  const int64_t rows = outer * inner;
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(classes, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t base = (row / inner) * classes * inner + row % inner;
                   const T* g = grad + base;
                   const T* out = y + base;
                   T* d = dx + base;
                   T total = 0;
                   if (log) {
                     for (int64_t c = 0; c < classes; ++c) total += g[c * inner];
                     for (int64_t c = 0; c < classes; ++c)
                       d[c * inner] = g[c * inner] - std::exp(out[c * inner]) * total;
                   } else {
                     for (int64_t c = 0; c < classes; ++c) total += g[c * inner] * out[c * inner];
                     for (int64_t c = 0; c < classes; ++c)
                       d[c * inner] = out[c * inner] * (g[c * inner] - total);
                   }
                 }
               });
}

}  // namespace est::ops::cpu
