// Index arithmetic of the plain kernels over NHWC images (conv_direct.cu, conv_layout.cu,
// pool_kernels.cu): the position of a flat index in a 4-D row-major array and the flat index of a
// position. The same two functions serve HWIO kernels, read as [KH, KW, I, O]. Both are exact
// integer arithmetic (the position's parts are i's successive remainders), so a kernel that
// uses them reads and writes the elements it did with the arithmetic written out.
#pragma once

#include <cstdint>

namespace est::ops::cuda {

// A position in a 4-D row-major array: n slowest, c fastest.
struct Nhwc {
  int64_t n, h, w, c;
};

// The position of flat index `i` in an array of sizes [*, height, width, channels].
__device__ inline Nhwc nhwc_position(int64_t i, int64_t height, int64_t width, int64_t channels) {
  Nhwc p;
  p.c = i % channels;
  i /= channels;
  p.w = i % width;
  i /= width;
  p.h = i % height;
  p.n = i / height;
  return p;
}

// The flat index of (n, h, w, c) in an array of sizes [*, height, width, channels].
__device__ inline int64_t nhwc_index(int64_t n, int64_t h, int64_t w, int64_t c, int64_t height,
                                     int64_t width, int64_t channels) {
  return ((n * height + h) * width + w) * channels + c;
}

}  // namespace est::ops::cuda
