// Jump-ahead for the xoshiro256** generator of ops/random.h, so that the GPU draws dropout's
// mask from the very numbers the CPU kernel draws, in parallel, and leaves the generator where
// the CPU kernel leaves it.
//
// xoshiro256**'s state update (shifts, rotations, xors) is linear over GF(2): the state after k
// steps is T^k applied to the state, T a 256 x 256 bit matrix. The table holds T^(2^level) for
// every level, each as its 256 columns (the image of each state bit), so advancing by any k is
// one matrix-vector product per set bit of k (at most kJumpLevels). A thread of the dropout
// kernel jumps to its first element and then steps; the host jumps the Generator by the mask's
// size. Plain C++ shared by g++ and nvcc (functions are host and device under nvcc); the step
// itself is ops/xoshiro.h's, the generator's own.
#pragma once

#include <cstdint>

#include "ops/xoshiro.h"

namespace est::ops::cuda {

constexpr int kJumpLevels = 48;  // jumps below 2^48 draws

struct XoshiroJumpTable {
  uint64_t columns[kJumpLevels][256][4];  // [level][state bit][word]: T^(2^level) e_bit
};

// s = M s for M given by its columns.
EST_HOST_DEVICE inline void xoshiro_apply(const uint64_t (*columns)[4], uint64_t s[4]) {
  uint64_t r[4] = {0, 0, 0, 0};
  for (int word = 0; word < 4; ++word) {
    uint64_t bits = s[word];
    for (int bit = 0; bits != 0; ++bit, bits >>= 1) {
      if ((bits & 1) == 0) continue;
      const uint64_t* column = columns[word * 64 + bit];
      r[0] ^= column[0];
      r[1] ^= column[1];
      r[2] ^= column[2];
      r[3] ^= column[3];
    }
  }
  for (int word = 0; word < 4; ++word) s[word] = r[word];
}

// s = T^count s: the state `count` steps later.
EST_HOST_DEVICE inline void xoshiro_jump(const XoshiroJumpTable& table, uint64_t s[4],
                                         uint64_t count) {
  for (int level = 0; level < kJumpLevels && count != 0; ++level, count >>= 1)
    if (count & 1) xoshiro_apply(table.columns[level], s);
}

// The dropout mask's elements [first, first + length) of n, from the generator state `start`
// that the whole mask begins at: each element is `scale` when its draw (as next_double)
// is >= rate, else 0, as ops/cpu/loss_kernels.cpp's dropout_mask.
template <class T>
EST_HOST_DEVICE void dropout_mask_range(const XoshiroJumpTable& table, const uint64_t start[4],
                                        uint64_t first, uint64_t length, double rate, T scale,
                                        T* mask) {
  uint64_t s[4] = {start[0], start[1], start[2], start[3]};
  xoshiro_jump(table, s, first);
  for (uint64_t i = 0; i < length; ++i) {
    const double u = static_cast<double>(xoshiro_next(s) >> 11) * 0x1.0p-53;
    mask[first + i] = u >= rate ? scale : T(0);
  }
}

// The table, built on first use (thread-safe) on the host: about 400 KB.
inline const XoshiroJumpTable& xoshiro_jump_table() {
  static const XoshiroJumpTable* const table = [] {
    auto* t = new XoshiroJumpTable;
    for (int bit = 0; bit < 256; ++bit) {  // level 0: T itself, column by column
      uint64_t s[4] = {0, 0, 0, 0};
      s[bit / 64] = uint64_t{1} << (bit % 64);
      xoshiro_next(s);
      for (int word = 0; word < 4; ++word) t->columns[0][bit][word] = s[word];
    }
    for (int level = 1; level < kJumpLevels; ++level)  // T^(2^level) = (T^(2^(level-1)))^2
      for (int bit = 0; bit < 256; ++bit) {
        uint64_t s[4];
        for (int word = 0; word < 4; ++word) s[word] = t->columns[level - 1][bit][word];
        xoshiro_apply(t->columns[level - 1], s);
        for (int word = 0; word < 4; ++word) t->columns[level][bit][word] = s[word];
      }
    return t;
  }();
  return *table;
}

}  // namespace est::ops::cuda
