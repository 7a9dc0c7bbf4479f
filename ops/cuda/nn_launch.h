// Host-side entry points of the plain CUDA kernels beside cuDNN for convolution, pooling and
// batch norm (conv_layout.cu, conv_direct.cu, pool_kernels.cu, batch_norm_kernels.cu), over raw
// device pointers.
//
// Shared by g++ and nvcc like launch.h, so it includes only plain headers; the window is passed
// as WindowGeometry (the fields of cpu::Window2D the kernels read) since window.h is C++20. Every
// function queues its kernels on `stream` and returns at once; a failed launch throws.
#pragma once

#include <cstdint>

#include "ops/dtype.h"

namespace est::ops::cuda {

using Stream = void*;

// conv_layout.cu ---------------------------------------------------------------------------
// out [cols, rows] = in [rows, cols] transposed: HWIO kernels <-> cuDNN's KRSC (OHWI) layout.
void transpose_2d(DType dtype, const void* in, void* out, int64_t rows, int64_t cols,
                  Stream stream);
// out [N, H + extra_h, W + extra_w, C] = in [N, H, W, C] followed by zero rows and columns:
// TensorFlow's extra bottom/right SAME padding, which cuDNN's symmetric padding lacks.
void pad_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                      int64_t c, int64_t extra_h, int64_t extra_w, Stream stream);
// out [N, H, W, C] = the top-left [H, W] of in [N, H + extra_h, W + extra_w, C].
void crop_bottom_right(DType dtype, const void* in, void* out, int64_t n, int64_t h, int64_t w,
                       int64_t c, int64_t extra_h, int64_t extra_w, Stream stream);

// The window of conv_direct.cu and pool_kernels.cu: the fields of cpu::Window2D they read
// (window_geometry.h fills it). Pooling reads in_c as its channels, never out_c or dilation.
struct WindowGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t kernel_h = 0, kernel_w = 0, out_h = 0, out_w = 0, out_c = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
};

// conv_direct.cu: convolution by direct summation over NHWC data and an HWIO kernel, with the
// window's own (asymmetric) padding; for what cuDNN has no algorithm for. Sums in double.
void conv_direct_forward(DType dtype, const void* in, const void* kernel, void* out,
                         const WindowGeometry& g, Stream stream);
void conv_direct_backward_data(DType dtype, const void* grad, const void* kernel, void* grad_input,
                               const WindowGeometry& g, Stream stream);
void conv_direct_backward_filter(DType dtype, const void* in, const void* grad, void* grad_kernel,
                                 const WindowGeometry& g, Stream stream);

// pool_kernels.cu --------------------------------------------------------------------------
// output [N, OH, OW, C]; `argmax` (int64, the output's shape, may be null): the input position
// h * W + w of the first maximum of each window in row-major order, as ops/cpu/pool_reference.
void max_pool_forward(DType dtype, const void* in, void* out, int64_t* argmax,
                      const WindowGeometry& g, Stream stream);
void avg_pool_forward(DType dtype, const void* in, void* out, const WindowGeometry& g,
                      Stream stream);
// grad_input [N, H, W, C], every element written (one thread gathers over its windows).
void max_pool_backward(DType dtype, const void* grad, const int64_t* argmax, void* grad_input,
                       const WindowGeometry& g, Stream stream);
void avg_pool_backward(DType dtype, const void* grad, void* grad_input, const WindowGeometry& g,
                       Stream stream);

// batch_norm_kernels.cu: x is [rows, C], channels fastest; gamma/beta may be null. -------------
// The doubles of scratch the statistics and gradient sums need.
int64_t batch_norm_scratch_size(int64_t rows, int64_t channels);
// mean, variance [C]: two passes in double, the variance biased (divided by rows).
void batch_norm_statistics(DType dtype, const void* x, void* mean, void* variance, double* scratch,
                           int64_t rows, int64_t channels, Stream stream);
void batch_norm_forward(DType dtype, const void* x, const void* gamma, const void* beta,
                        const void* mean, const void* variance, double epsilon, void* y,
                        int64_t rows, int64_t channels, Stream stream);
// sums [2 * C] (double): sum(dy) then sum(dy * xhat) per channel; grad_gamma / grad_beta (may
// be null) get them in the dtype.
void batch_norm_gradient_sums(DType dtype, const void* x, const void* mean, const void* variance,
                              const void* grad, double epsilon, double* scratch, double* sums,
                              void* grad_gamma, void* grad_beta, int64_t rows, int64_t channels,
                              Stream stream);
// grad_x from the sums; `training`: the statistics were the batch's own.
void batch_norm_grad_x(DType dtype, const void* x, const void* gamma, const void* mean,
                       const void* variance, const void* grad, const double* sums, double epsilon,
                       bool training, void* grad_x, int64_t rows, int64_t channels, Stream stream);

}  // namespace est::ops::cuda
