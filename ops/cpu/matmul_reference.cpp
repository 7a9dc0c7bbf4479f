// Reference GEMM through Eigen's row-major maps. Eigen would thread one product itself, but it
// sizes its blocks of the inner dimension by the thread count, so the sums would round
// differently on another number of threads (DESIGN: results never depend on the thread count).
// So the output is cut into a fixed number of blocks of rows or columns (cpu/parallel.h's
// fixed_parts, from the shape alone), each computed by Eigen on one thread, the blocks spread
// over the threads there are.
#include "ops/cpu/matmul_reference.h"

// Eigen 3.4's AVX-512 headers trip GCC 12's -Wunused-variable and (inlined from <immintrin.h>)
// false -Wmaybe-uninitialized warnings; they are not about this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>

#include "ops/cpu/parallel.h"

namespace est::ops::cpu {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A row-major block with its row stride (the full matrix's columns).
template <class T>
using Block = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstBlock = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Output rows or columns at least in a block: below this, one block (one thread) does it all.
constexpr int64_t kMinBlock = 32;
// Floating-point operations below which a block is not worth a thread of its own (a [64, k] x
// [k, n] product split over two threads paid from 2^19 to 2^20, bench/README.md).
constexpr int64_t kMinParallelFlops = int64_t{1} << 19;

template <class T, class A, class B>
void assign(Block<T>& c, const A& a, const B& b, bool accumulate) {
  if (accumulate)
    c.noalias() += a * b;
  else
    c.noalias() = a * b;
}

// c[rows r0..r1, columns n0..n1] of op(a) @ op(b), on the calling thread.
template <class T>
void gemm_block(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
                bool transpose_b, bool accumulate, int64_t r0, int64_t r1, int64_t n0, int64_t n1) {
  const int64_t rows = r1 - r0, cols = n1 - n0;
  Block<T> out(c + r0 * n + n0, rows, cols, Eigen::OuterStride<>(n));
  // op(a)'s rows r0..r1: rows of a [m, k], or columns of a stored as [k, m].
  ConstBlock<T> am = transpose_a ? ConstBlock<T>(a + r0, k, rows, Eigen::OuterStride<>(m))
                                 : ConstBlock<T>(a + r0 * k, rows, k, Eigen::OuterStride<>(k));
  // op(b)'s columns n0..n1: columns of b [k, n], or rows of b stored as [n, k].
  ConstBlock<T> bm = transpose_b ? ConstBlock<T>(b + n0 * k, cols, k, Eigen::OuterStride<>(k))
                                 : ConstBlock<T>(b + n0, k, cols, Eigen::OuterStride<>(n));
  if (!transpose_a && !transpose_b) assign<T>(out, am, bm, accumulate);
  if (!transpose_a && transpose_b) assign<T>(out, am, bm.transpose(), accumulate);
  if (transpose_a && !transpose_b) assign<T>(out, am.transpose(), bm, accumulate);
  if (transpose_a && transpose_b) assign<T>(out, am.transpose(), bm.transpose(), accumulate);
}

}  // namespace

template <class T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) Block<T>(c, m, n, Eigen::OuterStride<>(n)).setZero();
    return;
  }
  // Blocks of the longer side of the output, spread over the threads when each is worth a
  // thread; Eigen runs one thread in each (the scope sets it, inline or in a parallel region).
  const bool by_rows = m >= n;
  const int64_t side = by_rows ? m : n;
  const int64_t blocks = fixed_parts(side, kMinBlock);
  const int64_t flops_per_block = std::max<int64_t>(1, 2 * m * n * k / blocks);
  parallel_for(blocks, (kMinParallelFlops + flops_per_block - 1) / flops_per_block,
               [&](int64_t begin, int64_t end) {
                 const SerialScope one_thread(true);
                 for (int64_t block = begin; block < end; ++block) {
                   const int64_t first = side * block / blocks, last = side * (block + 1) / blocks;
                   if (by_rows)
                     gemm_block(a, b, c, m, n, k, transpose_a, transpose_b, accumulate, first, last,
                                int64_t{0}, n);
                   else
                     gemm_block(a, b, c, m, n, k, transpose_a, transpose_b, accumulate, int64_t{0},
                                m, first, last);
                 }
               });
}

template void gemm<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool, bool,
                          bool);
template void gemm<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool,
                           bool, bool);

void matmul_reference(const Tensor& a, const Tensor& b, Tensor& out, const MatmulDims& dims,
                      bool accumulate) {
  dispatch_float(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const int64_t a_step = dims.a_batched ? dims.m * dims.k : 0;
    const int64_t b_step = dims.b_batched ? dims.k * dims.n : 0;
    for (int64_t i = 0; i < dims.batch; ++i)
      gemm<T>(pa + i * a_step, pb + i * b_step, pc + i * dims.m * dims.n, dims.m, dims.n, dims.k,
              dims.transpose_a, dims.transpose_b, accumulate);
  });
}

}  // namespace est::ops::cpu

#pragma GCC diagnostic pop
