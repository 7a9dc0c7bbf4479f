// matmul / linear on the GPU: one strided-batched cuBLAS GEMM (float32 or float64), then the
// bias and activation kernel of layer.cu in place. bfloat16 operands go through
// cublasGemmStridedBatchedEx (CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F): straight into the
// bfloat16 output when there is no bias and no activation, else into a float32 product that
// takes the bias (widened) and the activation in float32 and is rounded to bfloat16 once, so
// every output element is rounded once, as the reference's.
//
// cuBLAS is column-major and a Tensor row-major; a row-major [r, c] matrix is the column-major
// [c, r] matrix with the same bytes, so C = op(A) op(B) (row-major) is computed as
// C^T = op(B)^T op(A)^T (column-major): B is the first GEMM operand, A the second, and each is
// transposed for cuBLAS exactly when it is transposed for the product. An operand that is not
// batched is shared by every batch (stride 0). Sizes reach cuBLAS's int API through
// gemm_ints (ops/cuda/gemm_dims.h), which refuses what does not fit. Each thread uses its own
// cuBLAS handle per GPU, lent by a process-wide pool and given back when the thread ends
// (ops/cuda/handle_pool.h), bound to that GPU's compute stream; float32 products use TF32
// tensor cores exactly when ops/tensor_float_32.h allows it (CUBLAS_TF32_TENSOR_OP_MATH, else
// CUBLAS_DEFAULT_MATH, which never rounds float32 inputs), set on every call.
#include <cublas_v2.h>

#include "ops/cuda/check.h"
#include "ops/cuda/gemm_dims.h"
#include "ops/cuda/handle_pool.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/runtime.h"
#include "ops/tensor_float_32.h"

namespace est::ops::cuda {
namespace {

// The pool outlives every thread (it is never destroyed: a thread may end after main returns).
const std::shared_ptr<HandlePool<cublasHandle_t>>& cublas_pool() {
  static const auto* pool = new std::shared_ptr<HandlePool<cublasHandle_t>>(
      std::make_shared<HandlePool<cublasHandle_t>>([](int device) {
        DeviceGuard guard(device);
        cublasHandle_t handle = nullptr;
        EST_CUBLAS_CHECK(cublasCreate(&handle));
        return handle;
      }));
  return *pool;
}

cublasHandle_t handle_for(int device) {
  thread_local ThreadHandles<cublasHandle_t> handles(cublas_pool());
  cublasHandle_t handle = handles.get(device);
  EST_CUBLAS_CHECK(cublasSetStream(handle, static_cast<cudaStream_t>(compute_stream(device))));
  EST_CUBLAS_CHECK(cublasSetMathMode(handle, tensor_float_32_execution_enabled()
                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                 : CUBLAS_DEFAULT_MATH));
  return handle;
}

// The bfloat16 product (see the header comment); `handle` is bound to the device's stream.
void matmul_bfloat16(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                     const MatmulDims& dims, Activation activation, int device, Stream stream) {
  const bool epilogue = bias.defined() || activation != Activation::kNone;
  Tensor product = epilogue ? Tensor::empty(out.shape(), DType::kF32, out.device()) : out;
  if (dims.k == 0) {
    cuda::fill(product.dtype(), product.raw_data(), product.numel(), 0.0, stream);
  } else {
    const cublasOperation_t op_a = dims.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = dims.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const GemmInts ints = gemm_ints(dims, "matmul");
    const int m = ints.m, n = ints.n, k = ints.k, lda = ints.lda, ldb = ints.ldb;
    const long long stride_a = dims.a_batched ? static_cast<long long>(dims.m) * dims.k : 0;
    const long long stride_b = dims.b_batched ? static_cast<long long>(dims.k) * dims.n : 0;
    const long long stride_c = static_cast<long long>(dims.m) * dims.n;
    const float one = 1.0f, zero = 0.0f;
    EST_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle_for(device), op_b, op_a, n, m, k, &one, b.raw_data(), CUDA_R_16BF, ldb, stride_b,
        a.raw_data(), CUDA_R_16BF, lda, stride_a, &zero, product.raw_data(),
        epilogue ? CUDA_R_32F : CUDA_R_16BF, n, stride_c, ints.batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
  }
  if (!epilogue) return;
  Tensor wide_bias;
  if (bias.defined()) {
    wide_bias = Tensor::empty(bias.shape(), DType::kF32, bias.device());
    cuda::cast(bias.dtype(), DType::kF32, bias.raw_data(), wide_bias.raw_data(), bias.numel(),
               stream);
  }
  cuda::bias_activation(DType::kF32, product.raw_data(),
                        wide_bias.defined() ? wide_bias.raw_data() : nullptr, activation,
                        product.numel() / dims.n, dims.n, stream);
  cuda::cast(DType::kF32, DType::kBF16, product.raw_data(), out.raw_data(), out.numel(), stream);
}

}  // namespace

int64_t cublas_handles_created() { return cublas_pool()->created(); }

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulDims& dims, Activation activation) {
  if (out.numel() == 0) return;
  const int device = out.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  if (out.dtype() == DType::kBF16) {
    matmul_bfloat16(a, b, bias, out, dims, activation, device, stream);
    return;
  }
  if (dims.k == 0) {
    cuda::fill(out.dtype(), out.raw_data(), out.numel(), 0.0, stream);  // an empty sum
  } else {
    const GemmInts ints = gemm_ints(dims, "matmul");  // before any work is queued
    cublasHandle_t handle = handle_for(device);
    const cublasOperation_t op_a = dims.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = dims.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = ints.m, n = ints.n, k = ints.k;
    const int lda = ints.lda, ldb = ints.ldb;  // A's and B's row lengths as stored
    const long long stride_a = dims.a_batched ? static_cast<long long>(dims.m) * dims.k : 0;
    const long long stride_b = dims.b_batched ? static_cast<long long>(dims.k) * dims.n : 0;
    const long long stride_c = static_cast<long long>(dims.m) * dims.n;
    const int batch = ints.batch;
    if (out.dtype() == DType::kF32) {
      const float one = 1.0f, zero = 0.0f;
      EST_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &one, b.data<float>(),
                                                 ldb, stride_b, a.data<float>(), lda, stride_a,
                                                 &zero, out.data<float>(), n, stride_c, batch));
    } else {
      const double one = 1.0, zero = 0.0;
      EST_CUBLAS_CHECK(cublasDgemmStridedBatched(
          handle, op_b, op_a, n, m, k, &one, b.data<double>(), ldb, stride_b, a.data<double>(), lda,
          stride_a, &zero, out.data<double>(), n, stride_c, batch));
    }
  }
  cuda::bias_activation(out.dtype(), out.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
                        activation, out.numel() / dims.n, dims.n, stream);
}

}  // namespace est::ops::cuda
