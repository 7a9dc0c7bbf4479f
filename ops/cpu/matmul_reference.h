// The Eigen reference matrix product: float32 and float64, either operand transposed, batched.
// linalg.cpp folds every matmul/linear problem into a MatmulDims, which both backends run.
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace est::ops::cpu {

// out[b] = op(a[b]) @ op(b[b]) for b in [0, batch); op transposes when asked.
// a holds [batch or 1, M, K] ([.., K, M] when transpose_a), b [batch or 1, K, N] ([.., N, K] when
// transpose_b), out [batch, M, N]. An operand that is not batched is shared by every batch.
struct MatmulDims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool a_batched = false, b_batched = false;
  bool transpose_a = false, transpose_b = false;
};

// Writes (or, with accumulate, adds into) `out`, which has batch * M * N elements.
void matmul_reference(const Tensor& a, const Tensor& b, Tensor& out, const MatmulDims& dims,
                      bool accumulate = false);

// Raw row-major product on one matrix pair, for the other reference kernels (conv's GEMMs).
template <class T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, bool accumulate);

}  // namespace est::ops::cpu
