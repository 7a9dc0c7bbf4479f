// Reference GEMM through Eigen's row-major maps (Eigen threads it with OpenMP).
#include "ops/cpu/matmul_reference.h"

// Eigen 3.4's AVX-512 headers trip GCC 12's -Wunused-variable and (inlined from <immintrin.h>)
// false -Wmaybe-uninitialized warnings; they are not about this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>

namespace est::ops::cpu {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Map = Eigen::Map<RowMajor<T>>;

template <class T, class A, class B>
void assign(Map<T>& c, const A& a, const B& b, bool accumulate) {
  if (accumulate)
    c.noalias() += a * b;
  else
    c.noalias() = a * b;
}

}  // namespace

template <class T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, bool accumulate) {
  Map<T> out(c, m, n);
  if (k == 0) {
    if (!accumulate) out.setZero();
    return;
  }
  // Unaligned maps: sub-matrices of a batch need not start on a 16-byte boundary.
  Eigen::Map<const RowMajor<T>> am(a, transpose_a ? k : m, transpose_a ? m : k);
  Eigen::Map<const RowMajor<T>> bm(b, transpose_b ? n : k, transpose_b ? k : n);
  if (!transpose_a && !transpose_b) assign<T>(out, am, bm, accumulate);
  if (!transpose_a && transpose_b) assign<T>(out, am, bm.transpose(), accumulate);
  if (transpose_a && !transpose_b) assign<T>(out, am.transpose(), bm, accumulate);
  if (transpose_a && transpose_b) assign<T>(out, am.transpose(), bm.transpose(), accumulate);
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
