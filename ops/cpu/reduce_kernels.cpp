// Reference reductions (sum, max, argmax) over any set of axes.
//
// The input's dims are grouped into runs of kept and reduced axes (size-1 dims dropped). One
// run of reduced axes is a single [outer, reduce, inner] pass; several runs are reduced one
// after another, last first, which is exact for sum and max. The pass picks its loop by shape:
// inner == 1 reduces contiguous rows (one whole-tensor sum is split into fixed blocks whose
// partial results are combined in order, so the result does not depend on the thread count);
// inner > 1 accumulates blocks of columns, which vectorises. Float sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/axis_layout.h"
#include "ops/cpu/checks.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"

namespace est::ops::cpu {
namespace {

constexpr int64_t kReduceGrain = int64_t{1} << 15;  // elements per task
constexpr int64_t kColumnBlock = 256;               // columns accumulated together

template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

struct SumOp {
  template <class T>
  using Acc = SumAcc<T>;
  template <class T>
  static Acc<T> init() {
    return 0;
  }
  static constexpr bool kPropagatesNaN = false;  // the sum does so by itself
  template <class A>
  static A combine(A acc, A v) {
    return acc + v;
  }
  template <class A>
  static A merge(A acc, A v) {
    return acc + v;
  }
};

// combine() is the exact form of x86 max (`acc > v ? acc : v`), so the loops vectorise; it
// may drop a NaN, so the loops also record whether they saw one and return NaN if so.
// merge() combines partial results and keeps a NaN on either side.
struct MaxOp {
  static constexpr bool kPropagatesNaN = true;
  template <class T>
  using Acc = T;
  template <class T>
  static T init() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  template <class A>
  static A combine(A acc, A v) {
    return acc > v ? acc : v;
  }
  template <class A>
  static A merge(A acc, A v) {
    return ((v > acc) | (v != v)) ? v : acc;
  }
};

// Reduces in: [outer, r, inner] to out: [outer, inner].
template <class Op, class T>
void reduce_pass(const T* in, T* out, int64_t outer, int64_t r, int64_t inner) {
  using A = typename Op::template Acc<T>;
  constexpr bool kTrackNaN = Op::kPropagatesNaN && std::is_floating_point_v<T>;
  constexpr A kNaN = std::numeric_limits<A>::quiet_NaN();
  if (inner == 1) {
    auto row = [&](const T* p, int64_t count) {
      A lanes[8];
      unsigned char nan[8] = {};
      for (A& l : lanes) l = Op::template init<T>();
      int64_t j = 0;
      for (; j + 8 <= count; j += 8)
        for (int k = 0; k < 8; ++k) {
          const A v = static_cast<A>(p[j + k]);
          lanes[k] = Op::combine(lanes[k], v);
          if constexpr (kTrackNaN) nan[k] |= v != v;
        }
      A acc = Op::template init<T>();
      for (A l : lanes) acc = Op::combine(acc, l);
      for (; j < count; ++j) {
        const A v = static_cast<A>(p[j]);
        acc = Op::combine(acc, v);
        if constexpr (kTrackNaN) nan[0] |= v != v;
      }
      if constexpr (kTrackNaN)
        for (unsigned char seen : nan)
          if (seen) return kNaN;
      return acc;
    };
    if (outer == 1 && r > kReduceGrain) {  // one long row: fixed blocks, merged in order
      int64_t blocks = (r + kReduceGrain - 1) / kReduceGrain;
      std::vector<A> partial(static_cast<size_t>(blocks));
      parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          int64_t start = b * kReduceGrain;
          partial[static_cast<size_t>(b)] = row(in + start, std::min(kReduceGrain, r - start));
        }
      });
      A acc = Op::template init<T>();
      for (A p : partial) acc = Op::merge(acc, p);
      out[0] = static_cast<T>(acc);
      return;
    }
    parallel_for(outer, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(r, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t o = begin; o < end; ++o)
                     out[o] = static_cast<T>(row(in + o * r, r));
                 });
    return;
  }
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  parallel_for(outer * blocks,
               std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(r * kColumnBlock, 1)),
               [&](int64_t begin, int64_t end) {
                 A acc[kColumnBlock];
                 unsigned char nan[kColumnBlock];
                 for (int64_t task = begin; task < end; ++task) {
                   int64_t o = task / blocks;
                   int64_t c0 = (task % blocks) * kColumnBlock;
                   int64_t width = std::min(kColumnBlock, inner - c0);
                   for (int64_t c = 0; c < width; ++c) {
                     acc[c] = Op::template init<T>();
                     nan[c] = 0;
                   }
                   for (int64_t j = 0; j < r; ++j) {
                     const T* p = in + (o * r + j) * inner + c0;
                     for (int64_t c = 0; c < width; ++c) {
                       const A v = static_cast<A>(p[c]);
                       acc[c] = Op::combine(acc[c], v);
                       if constexpr (kTrackNaN) nan[c] |= v != v;
                     }
                   }
                   for (int64_t c = 0; c < width; ++c)
                     out[o * inner + c0 + c] = static_cast<T>(kTrackNaN && nan[c] ? kNaN : acc[c]);
                 }
               });
}

// Reduces `x` over `axes` (normalised) with Op into `out` (the axes removed), pass by pass
// (reduction_passes); the last pass writes into `out`.
template <class Op>
void reduce_into(const char* name, const Tensor& x, const std::vector<int>& axes, Tensor& out) {
  const std::vector<AxisLayout> passes = reduction_passes(x.shape(), axes);
  dispatch_numeric(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    Tensor current = x;
    for (size_t pass = 0; pass < passes.size(); ++pass) {
      const AxisLayout& p = passes[pass];
      Tensor next = pass + 1 == passes.size() ? out : Tensor::empty({p.outer * p.inner}, x.dtype());
      if (p.outer * p.inner > 0)
        reduce_pass<Op>(current.data<T>(), next.data<T>(), p.outer, p.size, p.inner);
      current = next;
    }
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, Tensor& out) {
  if (op == ReduceOp::kSum)
    reduce_into<SumOp>("sum", x, axes, out);
  else
    reduce_into<MaxOp>("max", x, axes, out);
}

// The first maximum wins; a NaN counts as larger than any number.
void argmax(const Tensor& x, int axis, Tensor& out) {
  const AxisLayout layout = axis_layout(x.shape(), axis);
  const int64_t outer = layout.outer, r = layout.size, inner = layout.inner;
  int64_t* result = out.data<int64_t>();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    parallel_for(outer * inner, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(r, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) {
                     const T* p = in + (i / inner) * r * inner + i % inner;
                     T best = p[0];
                     int64_t best_index = 0;
                     for (int64_t j = 1; j < r; ++j) {
                       T v = p[j * inner];
                       if (v > best || (v != v && best == best)) {
                         best = v;
                         best_index = j;
                       }
                     }
                     result[i] = best_index;
                   }
                 });
  });
}

}  // namespace est::ops::cpu
