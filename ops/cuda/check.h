// Error checks for CUDA runtime and cuBLAS calls, for the backend's own .cpp files (this header
// includes the toolkit's). A failed call throws InternalError with the call, file and line and
// the runtime's message; an out-of-memory error is a ResourceExhaustedError saying what to do.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ops/error.h"

namespace est::ops::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);

}  // namespace est::ops::cuda

#define EST_CUDA_CHECK(call)                                                          \
  do {                                                                                \
    const cudaError_t est_cuda_error_ = (call);                                       \
    if (est_cuda_error_ != cudaSuccess)                                               \
      ::est::ops::cuda::throw_cuda_error(est_cuda_error_, #call, __FILE__, __LINE__); \
  } while (false)

#define EST_CUBLAS_CHECK(call)                                                             \
  do {                                                                                     \
    const int est_cublas_status_ = static_cast<int>(call);                                 \
    if (est_cublas_status_ != 0)                                                           \
      ::est::ops::cuda::throw_cublas_error(est_cublas_status_, #call, __FILE__, __LINE__); \
  } while (false)
