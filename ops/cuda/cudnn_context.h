// cuDNN for the CUDA backend: one handle per GPU, bound to that GPU's compute stream and shared
// by every thread under the context's mutex; the error check; the one place that maps a DType
// to cuDNN's data, compute and math types (a new dtype is one case there); RAII descriptors;
// and scratch memory from the caching allocator (no cudaMalloc once the cache is warm).
//
// Handles are created on a device's first cuDNN use and never destroyed, like the streams they
// are bound to (tensors in static storage may be freed after main returns, and cuDNN may be
// unloaded by then).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <mutex>

#include "ops/dtype.h"
#include "ops/tensor.h"

namespace est::ops::cuda {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);

#define EST_CUDNN_CHECK(call)                                                            \
  do {                                                                                   \
    const cudnnStatus_t est_cudnn_status_ = (call);                                      \
    if (est_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                       \
      ::est::ops::cuda::throw_cudnn_error(est_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (false)

// The device's cuDNN handle and the mutex its users hold while they queue work on it (and read
// or fill their per-shape caches).
struct CudnnContext {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};
// Makes `device` current if needed to create its handle; FailedPreconditionError without it.
CudnnContext& cudnn_context(int device);

// How cuDNN computes in a dtype. float32 is computed with FMA math (no TF32 tensor cores), so
// results match the float32 reference to within its tolerance; float64 in double.
struct CudnnTypes {
  cudnnDataType_t data;
  cudnnDataType_t compute;
  cudnnMathType_t math;
};
// UnimplementedError naming `op` and the dtype when cuDNN is not used for it here.
CudnnTypes cudnn_types(DType dtype, const char* op);

// cuDNN's alpha = 1 and beta = 0 in the scaling type its compute type wants (double for
// float64, float otherwise).
struct CudnnScaling {
  explicit CudnnScaling(DType dtype);
  const void* one() const { return use_double_ ? static_cast<const void*>(&d_[1]) : &f_[1]; }
  const void* zero() const { return use_double_ ? static_cast<const void*>(&d_[0]) : &f_[0]; }

 private:
  bool use_double_;
  float f_[2] = {0.0f, 1.0f};
  double d_[2] = {0.0, 1.0};
};

// An owning cuDNN descriptor: made by `create`, freed by `destroy` (not copyable; a per-shape
// plan holds them for the process's life).
template <class Handle, cudnnStatus_t (*create)(Handle*), cudnnStatus_t (*destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { EST_CUDNN_CHECK(create(&desc_)); }
  ~CudnnDescriptor() { destroy(desc_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  Handle get() const { return desc_; }

 protected:
  Handle desc_ = nullptr;
};

// The set functions return cuDNN's status (a dtype or layout it lacks is
// CUDNN_STATUS_NOT_SUPPORTED*); cudnn_usable() reads it.
class TensorDescriptor
    : public CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                             cudnnDestroyTensorDescriptor> {
 public:
  // A dense NHWC tensor of sizes [n, h, w, c].
  cudnnStatus_t set_nhwc(cudnnDataType_t type, int64_t n, int64_t h, int64_t w, int64_t c);
};

class FilterDescriptor
    : public CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                             cudnnDestroyFilterDescriptor> {
 public:
  // A KRSC filter ([out_c, kh, kw, in_c], cuDNN's NHWC filter format).
  cudnnStatus_t set_krsc(cudnnDataType_t type, int64_t out_c, int64_t kh, int64_t kw, int64_t in_c);
};

class ConvolutionDescriptor
    : public CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                             cudnnDestroyConvolutionDescriptor> {
 public:
  // Cross-correlation (TensorFlow's conv2d) with symmetric padding.
  cudnnStatus_t set(const CudnnTypes& types, int64_t pad_h, int64_t pad_w, int64_t stride_h,
                    int64_t stride_w, int64_t dilation_h, int64_t dilation_w);
};

// True when `status` is success, false when it is in cuDNN 9's "not supported" category (a
// shape, dtype or layout cuDNN lacks); any other error throws, naming `call`.
bool cudnn_usable(cudnnStatus_t status, const char* call);

// `bytes` of scratch on `device` from its caching allocator (an undefined tensor for 0); freed
// when the tensor goes, stream-ordered on the compute stream like every block.
Tensor cudnn_workspace(int device, size_t bytes);
inline void* workspace_data(Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// cuDNN takes int sizes: UnimplementedError naming `op` for a size past INT_MAX.
int cudnn_int(int64_t value, const char* op);

}  // namespace est::ops::cuda
