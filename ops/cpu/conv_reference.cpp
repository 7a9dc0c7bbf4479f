// Reference convolution by im2col. For a chunk of images the patches form a matrix
// col [images * OH * OW, KH * KW * C] (row-major, channels fastest, matching HWIO's flattening),
// so forward is col @ kernel[KH*KW*C, OC], whose rows are exactly the NHWC output; backward data
// is grad @ kernel^T scattered back (col2im), backward kernel is col^T @ grad.
#include "ops/cpu/conv_reference.h"

#include <algorithm>

#include "ops/cpu/matmul_reference.h"
#include "ops/cpu/parallel.h"

namespace est::ops::cpu {
namespace {

constexpr int64_t kMaxColumnElements = int64_t{1} << 22;  // bounds the im2col buffer (16 MiB f32)

int64_t patch_size(const Window2D& w) { return w.kernel_h * w.kernel_w * w.in_c; }
int64_t positions(const Window2D& w) { return w.out_h * w.out_w; }

// A 1x1 window with unit strides and no padding reads the input as it is: no im2col needed.
bool is_pointwise(const Window2D& w) {
  return w.kernel_h == 1 && w.kernel_w == 1 && w.stride_h == 1 && w.stride_w == 1 &&
         w.pad_top == 0 && w.pad_left == 0 && w.pad_bottom == 0 && w.pad_right == 0;
}

int64_t images_per_chunk(const Window2D& w) {
  return std::clamp<int64_t>(
      kMaxColumnElements / std::max<int64_t>(1, positions(w) * patch_size(w)), 1, w.batch);
}

// Calls tap(offset, pixel) for each kernel tap of output position (oh, ow) in patch order:
// offset is the tap's first element in the patch, pixel points to the element offset of the
// input pixel it reads in its image, or is null where the tap falls in the padding.
template <class Tap>
void each_tap(const Window2D& w, int64_t oh, int64_t ow, Tap&& tap) {
  int64_t offset = 0;
  for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
    const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dilation_h;
    for (int64_t kw = 0; kw < w.kernel_w; ++kw, offset += w.in_c) {
      const int64_t iw = ow * w.stride_w - w.pad_left + kw * w.dilation_w;
      const bool outside = ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w;
      const int64_t pixel = (ih * w.in_w + iw) * w.in_c;
      tap(offset, outside ? nullptr : &pixel);
    }
  }
}

// Calls chunk(first, count, col) for the chunks of images_per_chunk(w) images in order, col
// the im2col buffer they share.
template <class T, class Chunk>
void each_chunk(const Window2D& w, DType dtype, Chunk&& chunk) {
  const int64_t images = images_per_chunk(w);
  Tensor col = Tensor::empty({images * positions(w), patch_size(w)}, dtype);
  for (int64_t first = 0; first < w.batch; first += images)
    chunk(first, std::min(images, w.batch - first), col.data<T>());
}

// Fills col [count * OH * OW, KH * KW * C] from images [first, first + count).
template <class T>
void im2col(const T* input, T* col, const Window2D& w, int64_t first, int64_t count) {
  const int64_t patch = patch_size(w);
  parallel_for(count * w.out_h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row_block = begin; row_block < end; ++row_block) {
      const int64_t n = first + row_block / w.out_h, oh = row_block % w.out_h;
      const T* image = input + n * w.in_h * w.in_w * w.in_c;
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        T* row = col + (row_block * w.out_w + ow) * patch;
        each_tap(w, oh, ow, [&](int64_t offset, const int64_t* pixel) {
          T* dst = row + offset;
          if (!pixel) {
            for (int64_t c = 0; c < w.in_c; ++c) dst[c] = T(0);
          } else {
            const T* src = image + *pixel;
            for (int64_t c = 0; c < w.in_c; ++c) dst[c] = src[c];
          }
        });
      }
    }
  });
}

// Adds col's patches back into images [first, first + count) of grad_input (already zeroed
// there). Threads split by image, since patches of one image overlap.
template <class T>
void col2im(const T* col, T* grad_input, const Window2D& w, int64_t first, int64_t count) {
  const int64_t patch = patch_size(w);
  parallel_for(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t local = begin; local < end; ++local) {
      T* image = grad_input + (first + local) * w.in_h * w.in_w * w.in_c;
      for (int64_t oh = 0; oh < w.out_h; ++oh)
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const T* row = col + ((local * w.out_h + oh) * w.out_w + ow) * patch;
          each_tap(w, oh, ow, [&](int64_t offset, const int64_t* pixel) {
            if (!pixel) return;
            const T* src = row + offset;
            T* dst = image + *pixel;
            for (int64_t c = 0; c < w.in_c; ++c) dst[c] += src[c];
          });
        }
    }
  });
}

}  // namespace

void conv2d_forward_reference(const Tensor& input, const Tensor& kernel, Tensor& output,
                              const Window2D& w) {
  if (output.numel() == 0) return;
  dispatch_float(input.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = input.data<T>();
    const T* k = kernel.data<T>();
    T* out = output.data<T>();
    if (is_pointwise(w)) {
      gemm<T>(in, k, out, w.batch * positions(w), w.out_c, w.in_c, false, false, false);
      return;
    }
    each_chunk<T>(w, input.dtype(), [&](int64_t first, int64_t count, T* col) {
      im2col(in, col, w, first, count);
      gemm<T>(col, k, out + first * positions(w) * w.out_c, count * positions(w), w.out_c,
              patch_size(w), false, false, false);
    });
  });
}

void conv2d_backward_data_reference(const Tensor& grad_output, const Tensor& kernel,
                                    Tensor& grad_input, const Window2D& w) {
  if (grad_input.numel() == 0) return;
  if (grad_output.numel() == 0) return grad_input.fill(0.0);
  dispatch_float(grad_output.dtype(), "conv2d gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = grad_output.data<T>();
    const T* k = kernel.data<T>();
    T* dx = grad_input.data<T>();
    if (is_pointwise(w)) {
      gemm<T>(dy, k, dx, w.batch * positions(w), w.in_c, w.out_c, false, true, false);
      return;
    }
    std::fill(dx, dx + grad_input.numel(), T(0));
    each_chunk<T>(w, grad_output.dtype(), [&](int64_t first, int64_t count, T* col) {
      gemm<T>(dy + first * positions(w) * w.out_c, k, col, count * positions(w), patch_size(w),
              w.out_c, false, true, false);
      col2im(col, dx, w, first, count);
    });
  });
}

void conv2d_backward_kernel_reference(const Tensor& input, const Tensor& grad_output,
                                      Tensor& grad_kernel, const Window2D& w) {
  if (grad_kernel.numel() == 0) return;
  if (grad_output.numel() == 0 || input.numel() == 0) return grad_kernel.fill(0.0);
  dispatch_float(input.dtype(), "conv2d gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* in = input.data<T>();
    const T* dy = grad_output.data<T>();
    T* dk = grad_kernel.data<T>();
    if (is_pointwise(w)) {
      gemm<T>(in, dy, dk, w.in_c, w.out_c, w.batch * positions(w), true, false, false);
      return;
    }
    each_chunk<T>(w, input.dtype(), [&](int64_t first, int64_t count, T* col) {
      im2col(in, col, w, first, count);
      gemm<T>(col, dy + first * positions(w) * w.out_c, dk, patch_size(w), w.out_c,
              count * positions(w), true, false, /*accumulate=*/first > 0);
    });
  });
}

}  // namespace est::ops::cpu
