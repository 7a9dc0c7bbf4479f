// The 32-bit integers a cuBLAS GEMM takes (m, n, k, the leading dimensions, the batch count)
// from a product's 64-bit MatmulDims, checked: cuBLAS's int API would silently wrap a size
// above 2^31 - 1 into a negative or small one (a wrong product or an out-of-bounds access), so
// such a product is an InvalidArgumentError naming the size and what to do instead. The row-
// major product C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T
// (ops/cuda/matmul.cpp), hence the cuBLAS m is the product's n and its n the product's m.
// Host code with no CUDA type, compiled in every build so that its test runs everywhere.
#pragma once

#include "ops/cpu/matmul_reference.h"

namespace est::ops::cuda {

struct GemmInts {
  int m = 0, n = 0, k = 0;  // the product's M, N, K
  int lda = 0, ldb = 0;     // A's and B's row lengths as stored
  int ldc = 0;              // C's row length (N)
  int batch = 0;
};

// InvalidArgumentError naming `op` ("matmul") when a size does not fit an int.
GemmInts gemm_ints(const cpu::MatmulDims& dims, const char* op);

}  // namespace est::ops::cuda
