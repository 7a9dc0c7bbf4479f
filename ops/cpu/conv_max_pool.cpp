// The fused convolution + bias + activation + max pooling forward (conv_max_pool.h). For each
// pooling window and each 16 output channels, the window's convolution outputs are accumulated
// in vector registers side by side (for a 2x2 pool, 32 channels: eight chains, each input value
// and weight loaded once for four of them), activated, and reduced to the maximum and its position.
// Padding is materialised per image in a small buffer (C_in is small), so the inner loop has no
// bounds checks. The loops are one EST_MULTIVERSION function (cpu/isa.h), AVX-512 registers where
// the CPU has them.
#include "ops/cpu/conv_max_pool.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cpu/conv_kernel_gradient.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/vector16.h"

// The 64-byte vectors below never cross a non-inlined call in a multiversioned copy.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace est::ops::cpu {
namespace {

using namespace vec;
using Index16 = int32_t __attribute__((vector_size(64)));
constexpr int64_t kMaxPositions = 64;

// Offsets into one (padded) image, in floats.
struct Geometry {
  int64_t padded_h = 0, padded_w = 0;
  bool padded = false;
  std::vector<int64_t> taps;       // patch element (kh, kw, c) from the output position
  std::vector<int64_t> positions;  // window position (dy, dx) from the window's first output
  int64_t window_row = 0, window_col = 0;  // from one pooling window to the next, down / across
};

Geometry geometry(const Window2D& w, const MaxPoolAfterConv& pool) {
  Geometry g;
  g.padded = w.pad_top || w.pad_bottom || w.pad_left || w.pad_right;
  g.padded_h = w.in_h + w.pad_top + w.pad_bottom;
  g.padded_w = w.in_w + w.pad_left + w.pad_right;
  for (int64_t kh = 0; kh < w.kernel_h; ++kh)
    for (int64_t kw = 0; kw < w.kernel_w; ++kw)
      for (int64_t c = 0; c < w.in_c; ++c)
        g.taps.push_back((kh * w.dilation_h * g.padded_w + kw * w.dilation_w) * w.in_c + c);
  for (int64_t dy = 0; dy < pool.pool_h; ++dy)
    for (int64_t dx = 0; dx < pool.pool_w; ++dx)
      g.positions.push_back((dy * w.stride_h * g.padded_w + dx * w.stride_w) * w.in_c);
  g.window_row = pool.pool_h * w.stride_h * g.padded_w * w.in_c;
  g.window_col = pool.pool_w * w.stride_w * w.in_c;
  return g;
}

// Channels [c0, c0 + 16 * kBlocks) of one pooling window: out[c] = max over positions of
// act(bias + sum_t x[pos + tap] k[t, c]), and the position of the maximum.
template <int kPositions, int kBlocks>  // kPositions 0: g.positions.size() at run time
void window_channels(const float* x, const float* kernel, const float* bias, const Geometry& g,
                     int64_t channels, int64_t c0, Activation activation, float* out,
                     uint8_t* index) {
  constexpr int64_t kSlots = kPositions ? kPositions : kMaxPositions;
  const int64_t count = kPositions ? kPositions : static_cast<int64_t>(g.positions.size());
  const int64_t taps = static_cast<int64_t>(g.taps.size());
  const int64_t* positions = g.positions.data();
  Vector16 acc[kBlocks][kSlots] = {};
  for (int b = 0; b < kBlocks; ++b) {
    const Vector16 start = bias ? load16(bias + c0 + b * kLanes) : Vector16{};
    for (int64_t a = 0; a < count; ++a) acc[b][a] = start;
  }
  // kBlocks * count independent chains, each input value loaded once for all blocks.
  for (int64_t t = 0; t < taps; ++t) {
    const float* xt = x + g.taps[t];
    for (int b = 0; b < kBlocks; ++b) {
      const Vector16 weight = load16(kernel + t * channels + c0 + b * kLanes);
      for (int64_t a = 0; a < count; ++a) acc[b][a] += xt[positions[a]] * weight;
    }
  }
  const Vector16 zero = {};
  for (int b = 0; b < kBlocks; ++b) {
    if (activation == Activation::kRelu)
      for (int64_t a = 0; a < count; ++a) acc[b][a] = acc[b][a] > zero ? acc[b][a] : zero;
    Vector16 best = acc[b][0];
    Index16 where = {};
    for (int64_t a = 1; a < count; ++a) {
      const Index16 larger = acc[b][a] > best;
      best = larger ? acc[b][a] : best;
      where = larger ? Index16{} + static_cast<int32_t>(a) : where;
    }
    store16(out + c0 + b * kLanes, best);
    if (index)
      for (int l = 0; l < kLanes; ++l) index[c0 + b * kLanes + l] = static_cast<uint8_t>(where[l]);
  }
}

// One pooling window, every channel; a 2x2 pool takes 32 channels at a time (eight chains).
void pool_window(const float* x, const float* kernel, const float* bias, const Geometry& g,
                 int64_t channels, Activation activation, float* out, uint8_t* index) {
  if (g.positions.size() != 4) {
    for (int64_t c0 = 0; c0 < channels; c0 += kLanes)
      window_channels<0, 1>(x, kernel, bias, g, channels, c0, activation, out, index);
    return;
  }
  int64_t c0 = 0;
  for (; c0 + 2 * kLanes <= channels; c0 += 2 * kLanes)
    window_channels<4, 2>(x, kernel, bias, g, channels, c0, activation, out, index);
  if (c0 < channels)
    window_channels<4, 1>(x, kernel, bias, g, channels, c0, activation, out, index);
}

// Images [begin, end). `buffer` holds one padded image when the convolution pads.
EST_MULTIVERSION void forward_images(const float* input, const float* kernel, const float* bias,
                                     const Window2D& w, const MaxPoolAfterConv& pool,
                                     const Geometry& g, Activation activation, int64_t begin,
                                     int64_t end, float* pooled, uint8_t* argmax, float* buffer) {
  const int64_t image_size = w.in_h * w.in_w * w.in_c, channels = w.out_c;
  const int64_t row = w.in_w * w.in_c;
  for (int64_t n = begin; n < end; ++n) {
    const float* x = input + n * image_size;
    if (g.padded) {
      std::fill_n(buffer, g.padded_h * g.padded_w * w.in_c, 0.0f);
      for (int64_t h = 0; h < w.in_h; ++h)
        std::memcpy(buffer + ((h + w.pad_top) * g.padded_w + w.pad_left) * w.in_c, x + h * row,
                    sizeof(float) * row);
      x = buffer;
    }
    for (int64_t py = 0; py < pool.out_h; ++py)
      for (int64_t px = 0; px < pool.out_w; ++px) {
        const float* origin = x + py * g.window_row + px * g.window_col;
        const int64_t o = ((n * pool.out_h + py) * pool.out_w + px) * channels;
        uint8_t* index = argmax ? argmax + o : nullptr;
        pool_window(origin, kernel, bias, g, channels, activation, pooled + o, index);
      }
  }
}

}  // namespace

bool conv_max_pool_supported(const Window2D& conv, const MaxPoolAfterConv& pool,
                             Activation activation) {
  return (activation == Activation::kNone || activation == Activation::kRelu) &&
         fused_kernel_gradient_supported(conv) && pool.pool_h > 0 && pool.pool_w > 0 &&
         pool.pool_h * pool.pool_w <= kMaxPositions && pool.out_h == conv.out_h / pool.pool_h &&
         pool.out_w == conv.out_w / pool.pool_w;
}

void conv_max_pool_forward(const Tensor& input, const Tensor& kernel, const Tensor* bias,
                           Activation activation, const Window2D& w, const MaxPoolAfterConv& pool,
                           Tensor& pooled, Tensor* argmax) {
  if (!conv_max_pool_supported(w, pool, activation))
    throw InternalError("conv_max_pool_forward: unsupported geometry");
  const Geometry g = geometry(w, pool);
  const float* x = input.data<float>();
  const float* k = kernel.data<float>();
  const float* b = bias && bias->defined() ? bias->data<float>() : nullptr;
  float* out = pooled.data<float>();
  uint8_t* index = argmax ? argmax->data<uint8_t>() : nullptr;
  const int64_t buffer_size = g.padded ? g.padded_h * g.padded_w * w.in_c : 0;
  // Each image's outputs do not depend on the split, so any split gives the same bits.
  parallel_for(w.batch, 2, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(static_cast<size_t>(buffer_size));
    forward_images(x, k, b, w, pool, g, activation, begin, end, out, index, buffer.data());
  });
}

}  // namespace est::ops::cpu
