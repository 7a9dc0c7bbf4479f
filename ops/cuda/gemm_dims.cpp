// gemm_ints: the checked narrowing of a product's sizes to cuBLAS's ints (ops/cuda/gemm_dims.h).
#include "ops/cuda/gemm_dims.h"

#include <fmt/format.h>

#include <limits>

#include "ops/error.h"

namespace est::ops::cuda {
namespace {

int narrow(int64_t value, const char* what, const cpu::MatmulDims& dims, const char* op) {
  if (value >= 0 && value <= std::numeric_limits<int>::max()) return static_cast<int>(value);
  throw InvalidArgumentError(fmt::format(
      "{} on the GPU: {} is {}, above cuBLAS's limit of 2^31 - 1 (batch {}, M {}, N {}, K {}); "
      "split the product into smaller ones (fewer rows per call, or a loop over the batch)",
      op, what, value, dims.batch, dims.m, dims.n, dims.k));
}

}  // namespace

GemmInts gemm_ints(const cpu::MatmulDims& dims, const char* op) {
  GemmInts ints;
  ints.m = narrow(dims.m, "M (rows of the output)", dims, op);
  ints.n = narrow(dims.n, "N (columns of the output)", dims, op);
  ints.k = narrow(dims.k, "K (the summed dimension)", dims, op);
  ints.lda = dims.transpose_a ? ints.m : ints.k;
  ints.ldb = dims.transpose_b ? ints.k : ints.n;
  ints.ldc = ints.n;
  ints.batch = narrow(dims.batch, "the batch count", dims, op);
  return ints;
}

}  // namespace est::ops::cuda
