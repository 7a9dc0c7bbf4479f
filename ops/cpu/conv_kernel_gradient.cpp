// Fused activation gradient + convolution kernel gradient (see conv_kernel_gradient.h).
//
// The output rows are split into chunks (a number from the size alone, cpu/parallel.h, so the
// bits do not depend on the thread count), each with its own accumulator
// acc [patch + 1, OC] (the extra row, multiplied by ones, is the bias gradient). A chunk is
// walked in blocks of about kBlockPositions output positions; for each block
//   g  [positions, OC]        = activation'(grad_output, y)      (contiguous in NHWC)
//   pt [patch + 1, positions] = the input patches, transposed, then a row of ones
//   acc += pt @ g                                               (register-blocked below)
// and the chunks' accumulators are summed in order at the end. The micro-kernel keeps 16 output
// channels of up to 8 patch rows in vector registers (GCC/Clang vector extensions); a chunk's work
// is one EST_MULTIVERSION function (cpu/isa.h), so these are AVX-512 registers on a CPU that has
// them and narrower ones elsewhere, in the portable build as in a native one.
// conv_max_pool_kernel_gradient (conv_max_pool.h) runs the same blocks with g rebuilt from the
// gradient of the max pooling after the convolution and its argmax bytes.
#include "ops/cpu/conv_kernel_gradient.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/conv_max_pool.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/sum_in_order.h"
#include "ops/cpu/vector16.h"

// The 64-byte vectors below never cross a non-inlined call in a multiversioned copy; GCC's note
// about their ABI in the baseline copy is about functions internal to this file.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace est::ops::cpu {
namespace {

using namespace vec;
constexpr int kMaxPatch = 64;
constexpr int kMaxOutputChannels = 256;
constexpr int64_t kBlockPositions = 256;

void add16(float* p, Vector16 v) { store16(p, load16(p) + v); }

// acc[j, c0 : c0 + 16] += sum_b pt[j, b] * g[b, c0 : c0 + 16] for j in [j0, j0 + kRows).
// Fewer rows get more interleaved partial sums (kSets), so that about eight independent FMA
// chains are always in flight.
template <int kRows>
void accumulate_rows(const float* pt, int64_t pt_stride, const float* g, int64_t channels,
                     int64_t positions, int64_t j0, int64_t c0, float* acc) {
  constexpr int kSets = kRows >= 8 ? 1 : 8 / kRows;
  Vector16 sums[kSets][kRows] = {};
  int64_t b = 0;
  for (; b + kSets <= positions; b += kSets)
    for (int s = 0; s < kSets; ++s) {
      const Vector16 gradient = load16(g + (b + s) * channels + c0);
      for (int r = 0; r < kRows; ++r) sums[s][r] += pt[(j0 + r) * pt_stride + b + s] * gradient;
    }
  for (; b < positions; ++b) {
    const Vector16 gradient = load16(g + b * channels + c0);
    for (int r = 0; r < kRows; ++r) sums[0][r] += pt[(j0 + r) * pt_stride + b] * gradient;
  }
  for (int r = 0; r < kRows; ++r) {
    for (int s = 1; s < kSets; ++s) sums[0][r] += sums[s][r];
    add16(acc + (j0 + r) * channels + c0, sums[0][r]);
  }
}

// acc [rows, OC] += pt [rows, positions] @ g [positions, OC].
void accumulate_block(const float* pt, int64_t pt_stride, const float* g, int64_t rows,
                      int64_t channels, int64_t positions, float* acc) {
  for (int64_t c0 = 0; c0 < channels; c0 += kLanes) {
    int64_t j0 = 0;
    for (; j0 + 8 <= rows; j0 += 8)
      accumulate_rows<8>(pt, pt_stride, g, channels, positions, j0, c0, acc);
    if (j0 + 4 <= rows) {
      accumulate_rows<4>(pt, pt_stride, g, channels, positions, j0, c0, acc);
      j0 += 4;
    }
    if (j0 + 2 <= rows) {
      accumulate_rows<2>(pt, pt_stride, g, channels, positions, j0, c0, acc);
      j0 += 2;
    }
    if (j0 < rows) accumulate_rows<1>(pt, pt_stride, g, channels, positions, j0, c0, acc);
  }
}

// g = grad_output * activation'(.) from the activation's output y, over n values.
void activation_gradient(const float* dy, const float* y, float* g, int64_t n,
                         Activation activation) {
  switch (activation) {
    case Activation::kNone:
      std::memcpy(g, dy, sizeof(float) * n);
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) g[i] = y[i] > 0.0f ? dy[i] : 0.0f;
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) g[i] = dy[i] * y[i] * (1.0f - y[i]);
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) g[i] = dy[i] * (1.0f - y[i] * y[i]);
      return;
  }
}

// pt[j, r * OW + ow] for output rows [row0, row0 + count): patch element j = (kh, kw, c) of
// each position, zero in the padding; row `patch` is all ones.
void transposed_patches(const float* input, const Window2D& w, int64_t row0, int64_t count,
                        float* pt, int64_t pt_stride) {
  const int64_t patch = w.kernel_h * w.kernel_w * w.in_c;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t n = (row0 + r) / w.out_h, oh = (row0 + r) % w.out_h;
    const float* image = input + n * w.in_h * w.in_w * w.in_c;
    int64_t j = 0;
    for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
      const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dilation_h;
      const bool row_inside = ih >= 0 && ih < w.in_h;
      for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
        // Columns ow in [lo, hi) read inside the image, at iw = ow * stride + shift; the rest
        // of the row is padding.
        const int64_t shift = kw * w.dilation_w - w.pad_left;
        const int64_t lo =
            std::min(w.out_w, shift >= 0 ? 0 : (w.stride_w - 1 - shift) / w.stride_w);
        const int64_t hi = !row_inside || w.in_w - 1 - shift < 0
                               ? lo
                               : std::clamp((w.in_w - 1 - shift) / w.stride_w + 1, lo, w.out_w);
        const int64_t step = w.stride_w * w.in_c;
        for (int64_t c = 0; c < w.in_c; ++c, ++j) {
          float* dst = pt + j * pt_stride + r * w.out_w;
          std::fill(dst, dst + lo, 0.0f);
          if (hi > lo) {
            const float* src = image + (ih * w.in_w + lo * w.stride_w + shift) * w.in_c + c;
            if (step == 1)  // one input channel, stride 1: a contiguous run
              std::copy(src, src + (hi - lo), dst + lo);
            else
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[(ow - lo) * step];
          }
          std::fill(dst + hi, dst + w.out_w, 0.0f);
        }
      }
    }
    std::fill_n(pt + patch * pt_stride + r * w.out_w, w.out_w, 1.0f);
  }
}

// One chunk's output rows [first, last): acc [patch + 1, OC] += the blocks' products, the
// gradient of each block's outputs written to g by make_g(row0, count, g).
template <class MakeG>
void accumulate_rows_of(const float* x, const Window2D& w, int64_t first, int64_t last,
                        int64_t rows_per_block, int64_t pt_stride, float* pt, float* g, float* acc,
                        MakeG&& make_g) {
  const int64_t rows = w.kernel_h * w.kernel_w * w.in_c + 1, channels = w.out_c;
  for (int64_t row0 = first; row0 < last; row0 += rows_per_block) {
    const int64_t count = std::min(rows_per_block, last - row0);
    make_g(row0, count, g);
    transposed_patches(x, w, row0, count, pt, pt_stride);
    accumulate_block(pt, pt_stride, g, rows, channels, count * w.out_w, acc);
  }
}

EST_MULTIVERSION void accumulate_chunk(const float* x, const float* dy, const float* out,
                                       const Window2D& w, Activation activation, int64_t first,
                                       int64_t last, int64_t rows_per_block, int64_t pt_stride,
                                       float* pt, float* g, float* acc) {
  const int64_t row_size = w.out_w * w.out_c;
  accumulate_rows_of(x, w, first, last, rows_per_block, pt_stride, pt, g, acc,
                     [&](int64_t row0, int64_t count, float* block) {
                       const int64_t offset = row0 * row_size;
                       activation_gradient(dy + offset, out ? out + offset : nullptr, block,
                                           count * row_size, activation);
                     });
}

// g for output rows [row0, row0 + count) from the gradient of a max pooling after the
// convolution: each output's gradient is its window's pooled gradient where the window's maximum
// was taken there (argmax), times the activation's gradient at the pooled value (the output
// there), and zero elsewhere.
void pooled_gradient_rows(const float* dp, const float* pooled, const uint8_t* argmax,
                          const Window2D& w, const MaxPoolAfterConv& pool, Activation activation,
                          int64_t row0, int64_t count, float* g) {
  const int64_t channels = w.out_c, row_size = w.out_w * channels;
  const bool relu = activation == Activation::kRelu;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t n = (row0 + r) / w.out_h, oh = (row0 + r) % w.out_h;
    const int64_t py = oh / pool.pool_h, dy = oh % pool.pool_h;
    float* gr = g + r * row_size;
    if (py >= pool.out_h) {  // below the last pooling window
      std::fill_n(gr, row_size, 0.0f);
      continue;
    }
    for (int64_t ox = 0; ox < w.out_w; ++ox) {
      float* gp = gr + ox * channels;
      const int64_t px = ox / pool.pool_w;
      if (px >= pool.out_w) {  // right of the last pooling window
        std::fill_n(gp, channels, 0.0f);
        continue;
      }
      const int32_t a = static_cast<int32_t>(dy * pool.pool_w + ox % pool.pool_w);
      const int64_t o = ((n * pool.out_h + py) * pool.out_w + px) * channels;
      // No short-circuit and no vector select: GCC vectorizes this loop with mask registers.
      const float* d = dp + o;
      const float* v = pooled + o;
      const uint8_t* at = argmax + o;
      for (int64_t c = 0; c < channels; ++c) {
        const bool take = (at[c] == a) & (!relu | (v[c] > 0.0f));
        gp[c] = take ? d[c] : 0.0f;
      }
    }
  }
}

// accumulate_chunk with g from the gradient of a max pooling after the convolution.
EST_MULTIVERSION void accumulate_chunk_pooled(const float* x, const float* dp, const float* pooled,
                                              const uint8_t* argmax, const Window2D& w,
                                              const MaxPoolAfterConv& pool, Activation activation,
                                              int64_t first, int64_t last, int64_t rows_per_block,
                                              int64_t pt_stride, float* pt, float* g, float* acc) {
  accumulate_rows_of(x, w, first, last, rows_per_block, pt_stride, pt, g, acc,
                     [&](int64_t row0, int64_t count, float* block) {
                       pooled_gradient_rows(dp, pooled, argmax, w, pool, activation, row0, count,
                                            block);
                     });
}

// The chunks of out_rows output rows, each accumulated by chunk_fn(chunk, first, last, pt, g,
// acc), then summed in chunk order into grad_kernel and grad_bias.
template <class ChunkFn>
void kernel_gradient(const Window2D& w, Tensor& grad_kernel, Tensor* grad_bias,
                     ChunkFn&& chunk_fn) {
  const int64_t patch = w.kernel_h * w.kernel_w * w.in_c, rows = patch + 1;
  const int64_t channels = w.out_c, out_rows = w.batch * w.out_h;
  if (out_rows == 0 || w.out_w == 0) {  // an empty sum
    grad_kernel.fill(0.0);
    if (grad_bias) grad_bias->fill(0.0);
    return;
  }
  const int64_t rows_per_block = std::max<int64_t>(1, kBlockPositions / w.out_w);
  const int64_t pt_stride = rows_per_block * w.out_w;  // positions per block
  const int64_t scratch = rows * pt_stride + pt_stride * channels;
  // Parts from the size alone, added in order: the same bits on any number of threads.
  const int64_t chunks = fixed_parts(out_rows, rows_per_block);
  Tensor partial = Tensor::zeros({chunks, rows, channels});  // acc of each chunk
  Tensor buffers = Tensor::empty({chunks, scratch});         // pt and g of each chunk
  float* acc_base = partial.data<float>();
  float* buffer_base = buffers.data<float>();
  parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      float* pt = buffer_base + chunk * scratch;
      chunk_fn(out_rows * chunk / chunks, out_rows * (chunk + 1) / chunks, rows_per_block,
               pt_stride, pt, pt + rows * pt_stride, acc_base + chunk * rows * channels);
    }
  });
  float* dk = grad_kernel.data<float>();
  float* db = grad_bias ? grad_bias->data<float>() : nullptr;
  sum_in_order<float>(
      chunks, rows * channels, [&](int64_t chunk) { return acc_base + chunk * rows * channels; },
      [&](int64_t i, float total) {
        if (i < patch * channels)
          dk[i] = total;
        else if (db)
          db[i - patch * channels] = total;
      });
}

}  // namespace

bool fused_kernel_gradient_supported(const Window2D& w) {
  const int64_t patch = w.kernel_h * w.kernel_w * w.in_c;
  return patch <= kMaxPatch && w.out_c % kLanes == 0 && w.out_c <= kMaxOutputChannels &&
         w.out_w <= kBlockPositions;
}

void conv2d_kernel_gradient_fused(const Tensor& input, const Tensor& grad_output, const Tensor& y,
                                  Activation activation, const Window2D& w, Tensor& grad_kernel,
                                  Tensor* grad_bias) {
  const float* x = input.data<float>();
  const float* dy = grad_output.data<float>();
  const float* out = y.defined() ? y.data<float>() : nullptr;
  kernel_gradient(w, grad_kernel, grad_bias,
                  [&](int64_t first, int64_t last, int64_t rows_per_block, int64_t pt_stride,
                      float* pt, float* g, float* acc) {
                    accumulate_chunk(x, dy, out, w, activation, first, last, rows_per_block,
                                     pt_stride, pt, g, acc);
                  });
}

void conv_max_pool_kernel_gradient(const Tensor& input, const Tensor& grad_pooled,
                                   const Tensor& pooled, const Tensor& argmax,
                                   Activation activation, const Window2D& w,
                                   const MaxPoolAfterConv& pool, Tensor& grad_kernel,
                                   Tensor* grad_bias) {
  const float* x = input.data<float>();
  const float* dp = grad_pooled.data<float>();
  const float* v = pooled.data<float>();
  const uint8_t* at = argmax.data<uint8_t>();
  kernel_gradient(w, grad_kernel, grad_bias,
                  [&](int64_t first, int64_t last, int64_t rows_per_block, int64_t pt_stride,
                      float* pt, float* g, float* acc) {
                    accumulate_chunk_pooled(x, dp, v, at, w, pool, activation, first, last,
                                            rows_per_block, pt_stride, pt, g, acc);
                  });
}

}  // namespace est::ops::cpu
