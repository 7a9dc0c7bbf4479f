// Adding the partial results of a reduction split into fixed parts (parallel.h's fixed_parts)
// in part order: the one summation order the CPU and oneDNN kernels' deterministic reductions
// share, so their bits do not depend on the thread count.
#pragma once

#include <cstdint>

namespace est::ops::cpu {

// Adds the partial results of fixed parts in part order: for each i in [0, width),
// out(i, total) with total = init + part(0)[i] + part(1)[i] + ... (part(p) returns a pointer to
// part p's `width` values). The fixed order is what makes a reduction split by fixed_parts give
// the same bits on any number of threads. Acc is the type the total is added in; init +0 is a
// plain sum, and -0 starts from part 0's value exactly (-0 + x == x for every x, signed zeros
// included).
template <class Acc, class PartFn, class OutFn>
void sum_in_order(int64_t parts, int64_t width, PartFn&& part, OutFn&& out, Acc init = Acc(0)) {
  for (int64_t i = 0; i < width; ++i) {
    Acc total = init;
    for (int64_t p = 0; p < parts; ++p) total += part(p)[i];
    out(i, total);
  }
}

}  // namespace est::ops::cpu
