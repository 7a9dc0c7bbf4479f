// Bias, activation and column-sum loops (see bias_activation.h). Plain loops the compiler
// vectorizes, split over the intra-op threads; they are memory-bound, so oneDNN would not help.
// Each float32 chunk is an EST_MULTIVERSION function (cpu/isa.h), compiled for AVX-512, AVX2 and
// the baseline and chosen when the program loads.
#include "ops/cpu/bias_activation.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/sum_in_order.h"

namespace est::ops::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per thread below which loops run inline

template <class T>
void activation_range(T* x, int64_t begin, int64_t end, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t i = begin; i < end; ++i) x[i] = x[i] > T(0) ? x[i] : T(0);
      return;
    case Activation::kSigmoid:
      for (int64_t i = begin; i < end; ++i) x[i] = T(1) / (T(1) + std::exp(-x[i]));
      return;
    case Activation::kTanh:
      for (int64_t i = begin; i < end; ++i) x[i] = std::tanh(x[i]);
      return;
  }
}

template <class T>
void activation_backward_range(const T* dy, const T* y, T* dx, int64_t begin, int64_t end,
                               Activation activation) {
  switch (activation) {
    case Activation::kNone:
      for (int64_t i = begin; i < end; ++i) dx[i] = dy[i];
      return;
    case Activation::kRelu:
      for (int64_t i = begin; i < end; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
      return;
    case Activation::kSigmoid:
      for (int64_t i = begin; i < end; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
      return;
    case Activation::kTanh:
      for (int64_t i = begin; i < end; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
      return;
  }
}

template <class T>
void add_bias_rows(T* x, const T* bias, int64_t channels, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) row[c] += bias[c];
  }
}

// acc[c] += sum of rows [begin, end) of x [rows, C], in double.
template <class T>
void sum_rows(const T* x, int64_t channels, int64_t begin, int64_t end, double* acc) {
  for (int64_t r = begin; r < end; ++r) {
    const T* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) acc[c] += static_cast<double>(row[c]);
  }
}

// The float32 chunks, one copy per instruction set.
EST_MULTIVERSION void activation_range_f32(float* x, int64_t begin, int64_t end,
                                           Activation activation) {
  activation_range(x, begin, end, activation);
}

EST_MULTIVERSION void activation_backward_range_f32(const float* dy, const float* y, float* dx,
                                                    int64_t begin, int64_t end,
                                                    Activation activation) {
  activation_backward_range(dy, y, dx, begin, end, activation);
}

EST_MULTIVERSION void add_bias_rows_f32(float* x, const float* bias, int64_t channels,
                                        int64_t begin, int64_t end) {
  add_bias_rows(x, bias, channels, begin, end);
}

EST_MULTIVERSION void sum_rows_f32(const float* x, int64_t channels, int64_t begin, int64_t end,
                                   double* acc) {
  sum_rows(x, channels, begin, end, acc);
}

template <class T>
void activation_chunk(T* x, int64_t begin, int64_t end, Activation activation) {
  if constexpr (std::is_same_v<T, float>)
    activation_range_f32(x, begin, end, activation);
  else
    activation_range(x, begin, end, activation);
}

template <class T>
void activation_backward_chunk(const T* dy, const T* y, T* dx, int64_t begin, int64_t end,
                               Activation activation) {
  if constexpr (std::is_same_v<T, float>)
    activation_backward_range_f32(dy, y, dx, begin, end, activation);
  else
    activation_backward_range(dy, y, dx, begin, end, activation);
}

template <class T>
void add_bias_chunk(T* x, const T* bias, int64_t channels, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, float>)
    add_bias_rows_f32(x, bias, channels, begin, end);
  else
    add_bias_rows(x, bias, channels, begin, end);
}

template <class T>
void sum_rows_chunk(const T* x, int64_t channels, int64_t begin, int64_t end, double* acc) {
  if constexpr (std::is_same_v<T, float>)
    sum_rows_f32(x, channels, begin, end, acc);
  else
    sum_rows(x, channels, begin, end, acc);
}

}  // namespace

void add_bias_inplace(Tensor& x, const Tensor& bias) {
  const int64_t channels = bias.numel();
  if (channels == 0) return;
  const int64_t rows = x.numel() / channels;
  dispatch_float(x.dtype(), "bias_add", [&](auto tag) {
    using T = decltype(tag);
    T* px = x.data<T>();
    const T* pb = bias.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kGrain / channels),
                 [&](int64_t begin, int64_t end) { add_bias_chunk(px, pb, channels, begin, end); });
  });
}

void activate_inplace(Tensor& x, Activation activation) {
  if (activation == Activation::kNone) return;
  dispatch_float(x.dtype(), "activation", [&](auto tag) {
    using T = decltype(tag);
    T* px = x.data<T>();
    parallel_for(x.numel(), kGrain,
                 [&](int64_t begin, int64_t end) { activation_chunk(px, begin, end, activation); });
  });
}

void activation_backward(const Tensor& grad_output, const Tensor& y, Tensor& grad_input,
                         Activation activation) {
  dispatch_float(y.dtype(), "activation gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = grad_output.data<T>();
    const T* py = y.data<T>();
    T* dx = grad_input.data<T>();
    parallel_for(y.numel(), kGrain, [&](int64_t begin, int64_t end) {
      activation_backward_chunk(dy, py, dx, begin, end, activation);
    });
  });
}

void column_sums(const Tensor& x, Tensor& out) {
  const int64_t channels = out.numel();
  if (channels == 0) return;
  const int64_t rows = x.numel() / channels;
  dispatch_float(x.dtype(), "column_sums", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const int64_t chunks = fixed_parts(rows, std::max<int64_t>(1, kGrain / channels));
    // Each chunk of rows sums into its own row of `partial` (double, for float32's sake), and
    // the rows are added in order: the same bits on any number of threads.
    Tensor partial = Tensor::zeros({chunks, channels}, DType::kF64);
    double* pp = partial.data<double>();
    parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
      for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk)
        sum_rows_chunk(px, channels, rows * chunk / chunks, rows * (chunk + 1) / chunks,
                       pp + chunk * channels);
    });
    sum_in_order<double>(
        chunks, channels, [&](int64_t chunk) { return pp + chunk * channels; },
        [&](int64_t c, double total) { po[c] = static_cast<T>(total); });
  });
}

void sum_leading(const Tensor& x, int64_t batch, Tensor& out) {
  const int64_t rest = out.numel();
  dispatch_float(x.dtype(), "sum_leading", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(rest, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) po[j] = T(0);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = begin; j < end; ++j) po[j] += px[b * rest + j];
    });
  });
}

}  // namespace est::ops::cpu
