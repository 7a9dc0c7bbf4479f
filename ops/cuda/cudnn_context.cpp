// cuDNN handles, descriptors, types and scratch for the CUDA backend (see cudnn_context.h).
#include "ops/cuda/cudnn_context.h"

#include <fmt/format.h>

#include <climits>
#include <memory>
#include <vector>

#include "ops/cuda/check.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  const std::string message =
      fmt::format("cuDNN error {} ({}) in {} at {}:{}", static_cast<int>(status),
                  cudnnGetErrorString(status), call, file, line);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    throw ResourceExhaustedError(message +
                                 "; the GPU is out of memory: reduce the batch size, or "
                                 "give cached blocks back with ops::trim_memory(device)");
  throw InternalError(message);
}

CudnnContext& cudnn_context(int device) {
  require_device(device);
  static std::mutex mutex;
  static std::vector<CudnnContext*> contexts;  // never destroyed (see the header)
  std::lock_guard<std::mutex> lock(mutex);
  if (contexts.size() <= static_cast<size_t>(device)) contexts.resize(device + 1, nullptr);
  CudnnContext*& context = contexts[static_cast<size_t>(device)];
  if (context == nullptr) {
    DeviceGuard guard(device);
    auto created = std::make_unique<CudnnContext>();
    EST_CUDNN_CHECK(cudnnCreate(&created->handle));
    EST_CUDNN_CHECK(
        cudnnSetStream(created->handle, static_cast<cudaStream_t>(compute_stream(device))));
    context = created.release();
  }
  return *context;
}

CudnnTypes cudnn_types(DType dtype, const char* op) {
  switch (dtype) {
    case DType::kF32:
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH};
    case DType::kF64:
      return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH};
    default:
      break;
  }
  throw UnimplementedError(
      fmt::format("{}: the CUDA backend has no cuDNN kernel for {}; use float32 or float64", op,
                  dtype_name(dtype)));
}

CudnnScaling::CudnnScaling(DType dtype) : use_double_(dtype == DType::kF64) {}

cudnnStatus_t TensorDescriptor::set_nhwc(cudnnDataType_t type, int64_t n, int64_t h, int64_t w,
                                         int64_t c) {
  const char* op = "cuDNN tensor";
  return cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NHWC, type, cudnn_int(n, op),
                                    cudnn_int(c, op), cudnn_int(h, op), cudnn_int(w, op));
}

cudnnStatus_t FilterDescriptor::set_krsc(cudnnDataType_t type, int64_t out_c, int64_t kh,
                                         int64_t kw, int64_t in_c) {
  const char* op = "cuDNN filter";
  return cudnnSetFilter4dDescriptor(desc_, type, CUDNN_TENSOR_NHWC, cudnn_int(out_c, op),
                                    cudnn_int(in_c, op), cudnn_int(kh, op), cudnn_int(kw, op));
}

cudnnStatus_t ConvolutionDescriptor::set(const CudnnTypes& types, int64_t pad_h, int64_t pad_w,
                                         int64_t stride_h, int64_t stride_w, int64_t dilation_h,
                                         int64_t dilation_w) {
  const char* op = "cuDNN convolution";
  const cudnnStatus_t status = cudnnSetConvolution2dDescriptor(
      desc_, cudnn_int(pad_h, op), cudnn_int(pad_w, op), cudnn_int(stride_h, op),
      cudnn_int(stride_w, op), cudnn_int(dilation_h, op), cudnn_int(dilation_w, op),
      CUDNN_CROSS_CORRELATION, types.compute);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  return cudnnSetConvolutionMathType(desc_, types.math);
}

bool cudnn_usable(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  // cuDNN 9's statuses are a category (thousands) plus a detail.
  if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) return false;
  throw_cudnn_error(status, call, __FILE__, __LINE__);
}

Tensor cudnn_workspace(int device, size_t bytes) {
  if (bytes == 0) return Tensor();
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::kU8, Device::cuda(device));
}

int cudnn_int(int64_t value, const char* op) {
  if (value < 0 || value > INT_MAX)
    throw UnimplementedError(
        fmt::format("{}: size {} does not fit cuDNN's int sizes; split the batch into smaller ones",
                    op, value));
  return static_cast<int>(value);
}

}  // namespace est::ops::cuda
