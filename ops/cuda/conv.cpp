// conv2d and its gradients on the GPU through cuDNN (legacy descriptor API, still in cuDNN 9),
// with TensorFlow's layouts and windows (ops/cpu/conv_reference.h is the semantics):
//   - the input and output are NHWC tensors; the HWIO kernel is transposed into cuDNN's KRSC
//     ([C_out, KH, KW, C_in], its NHWC filter format) by forward, which leaves it in
//     `kernel_for_backward` for the data gradient; the filter gradient comes back in KRSC and is
//     transposed into HWIO;
//   - TensorFlow's SAME padding puts the odd element at the bottom/right, cuDNN pads both sides
//     equally: cuDNN gets the top/left padding and the input gets the extra row/column of zeros
//     explicitly (conv_layout.cu), the data gradient is computed for that padded input and
//     cropped;
//   - the bias and activation are applied to the output in place (layer.cu), their gradients
//     by the op (ops/conv.cpp) before the backward kernels, as on the CPU.
// Descriptors and the algorithm of each direction are cached per (device, dtype, TF32 or not,
// window); the first call of each direction for a shape picks the algorithm: by timing every
// one (cudnnFind*Algorithm, as TensorFlow's autotuning and PyTorch's cudnn.benchmark do; on by
// default, EST_CUDNN_AUTOTUNE=0 turns it off, and a shape first seen inside a CUDA graph
// capture, which cannot time, falls back to) cuDNN's heuristics (cudnnGet*Algorithm_v7:
// deterministic first); either way the fastest that fits kMaxWorkspace and the plan's math, and
// each choice is logged once (direction, shape, algorithm, workspace, math). float32 runs on
// TF32 tensor cores (CUDNN_TENSOR_OP_MATH) exactly when ops/tensor_float_32.h allows it, else
// with FMA math. Workspaces come from the caching allocator. Where cuDNN has no algorithm
// for a shape or dtype (or declines one when it runs), the direct kernels of conv_direct.cu run
// instead, warned once per shape and direction (EST_CUDA_CONV_DIRECT=1 forces them for the
// shapes first seen while it is set). TensorFlow's
// tensorflow/core/kernels/conv_ops.cc (explicit padding of the input for asymmetric SAME)
// was followed for the padding.
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ops/cuda/check.h"
#include "ops/cuda/cudnn_context.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/nn_launch.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/window_geometry.h"
#include "ops/logging.h"
#include "ops/tensor_float_32.h"

namespace est::ops::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;  // algorithms wanting more are passed over

struct Algorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;
  bool direct = false;  // cuDNN has none: conv_direct.cu's kernel runs
};

// Everything cuDNN needs for one window, plus the algorithms chosen so far.
struct ConvPlan {
  int64_t extra_h = 0, extra_w = 0;  // zero rows/columns appended to the input
  TensorDescriptor x;                // the (padded) input
  TensorDescriptor y;                // the output
  FilterDescriptor w;                // the KRSC kernel
  ConvolutionDescriptor conv;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::optional<Algorithm> forward, backward_data, backward_filter;
};

using PlanKey = std::array<int64_t, 20>;

PlanKey plan_key(int device, DType dtype, bool tensor_float_32, const Window2D& w) {
  return {device,
          static_cast<int64_t>(dtype),
          tensor_float_32 ? 1 : 0,
          w.batch,
          w.in_h,
          w.in_w,
          w.in_c,
          w.kernel_h,
          w.kernel_w,
          w.out_h,
          w.out_w,
          w.out_c,
          w.stride_h,
          w.stride_w,
          w.dilation_h,
          w.dilation_w,
          w.pad_top,
          w.pad_left,
          w.pad_bottom,
          w.pad_right};
}

// Warns, once per shape and direction, that cuDNN has no algorithm and the direct kernel runs
// (a warning, so that a slow fall-back is never silent, EST_LOG_LEVEL=WARNING included).
void log_direct(const char* direction, DType dtype, const Window2D& w, const char* why) {
  log::warning(
      "conv2d: {} for {} input [{}, {}, {}, {}], kernel {}x{}x{}x{}, strides {}x{}, dilations "
      "{}x{}: {}; using the direct CUDA kernel (slow)",
      direction, dtype_name(dtype), w.batch, w.in_h, w.in_w, w.in_c, w.kernel_h, w.kernel_w, w.in_c,
      w.out_c, w.stride_h, w.stride_w, w.dilation_h, w.dilation_w, why);
}

// Whether a new plan times cuDNN's algorithms (EST_CUDNN_AUTOTUNE unset or not "0", as
// TensorFlow's TF_CUDNN_USE_AUTOTUNE) rather than trusting its heuristics.
bool autotune() {
  const char* value = std::getenv("EST_CUDNN_AUTOTUNE");
  return value == nullptr || std::string_view(value) != "0";
}

// EST_CUDA_CONV_DIRECT=1 when a shape's plan is made: the direct kernels for every direction of
// that shape (to test them, or to rule cuDNN out when a result looks wrong).
bool direct_forced() {
  const char* value = std::getenv("EST_CUDA_CONV_DIRECT");
  return value != nullptr && std::string_view(value) == "1";
}

// The plan for `w`, created on first use. Called under the device's cuDNN mutex; the map has
// its own (plans of other devices are made under other mutexes).
ConvPlan& plan_for(int device, DType dtype, const Window2D& w) {
  static std::mutex mutex;
  static std::map<PlanKey, std::unique_ptr<ConvPlan>> plans;  // one per shape, kept
  const bool tensor_float_32 = dtype == DType::kF32 && tensor_float_32_execution_enabled();
  const PlanKey key = plan_key(device, dtype, tensor_float_32, w);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
  }
  CudnnTypes types = cudnn_types(dtype, "conv2d");
  if (tensor_float_32) types.math = CUDNN_TENSOR_OP_MATH;
  auto plan = std::make_unique<ConvPlan>();
  plan->extra_h = w.pad_bottom - w.pad_top;  // TensorFlow's rule: 0 or 1, never negative
  plan->extra_w = w.pad_right - w.pad_left;
  plan->math = types.math;
  const bool usable =
      cudnn_usable(plan->x.set_nhwc(types.data, w.batch, w.in_h + plan->extra_h,
                                    w.in_w + plan->extra_w, w.in_c),
                   "cudnnSetTensor4dDescriptor") &&
      cudnn_usable(plan->y.set_nhwc(types.data, w.batch, w.out_h, w.out_w, w.out_c),
                   "cudnnSetTensor4dDescriptor") &&
      cudnn_usable(plan->w.set_krsc(types.data, w.out_c, w.kernel_h, w.kernel_w, w.in_c),
                   "cudnnSetFilter4dDescriptor") &&
      cudnn_usable(plan->conv.set(types, w.pad_top, w.pad_left, w.stride_h, w.stride_w,
                                  w.dilation_h, w.dilation_w),
                   "cudnnSetConvolution2dDescriptor");
  const bool forced = direct_forced();
  if (!usable || forced) {
    log_direct("every direction", dtype, w,
               forced ? "EST_CUDA_CONV_DIRECT=1" : "cuDNN cannot describe it");
    plan->forward = plan->backward_data = plan->backward_filter = Algorithm{0, 0, true};
  } else {
    int n = 0, c = 0, h = 0, width = 0;
    EST_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv.get(), plan->x.get(),
                                                          plan->w.get(), &n, &c, &h, &width));
    if (n != w.batch || c != w.out_c || h != w.out_h || width != w.out_w)
      throw InternalError(fmt::format(
          "conv2d: cuDNN computes an output of [{}, {}, {}, {}] where TensorFlow's window has "
          "[{}, {}, {}, {}] (input [{}, {}, {}, {}], kernel {}x{}, strides {}x{}, dilations "
          "{}x{}, padding {}/{}/{}/{})",
          n, h, width, c, w.batch, w.out_h, w.out_w, w.out_c, w.batch, w.in_h, w.in_w, w.in_c,
          w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.dilation_h, w.dilation_w, w.pad_top,
          w.pad_bottom, w.pad_left, w.pad_right));
  }
  std::lock_guard<std::mutex> lock(mutex);
  return *plans.emplace(key, std::move(plan)).first->second;
}

const char* math_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_FMA_MATH:
      return "FMA";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor cores";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor cores with conversion";
    default:
      return "default";
  }
}

// The first result (in cuDNN's order: fastest first when `timed`, else its heuristic ranking,
// deterministic ones first) that cuDNN supports, fits kMaxWorkspace and does not ask for
// tensor-op math the plan does not allow; the direct kernel when there is none. `size_of` gives
// an algorithm's workspace or nullopt when cuDNN declines it. The choice is logged.
template <class Perf, class SizeOf>
Algorithm pick(const std::vector<Perf>& perf, int returned, cudnnMathType_t math, SizeOf size_of,
               bool timed, const char* direction, DType dtype, const Window2D& w) {
  for (const bool deterministic_only : {!timed, false})
    for (int i = 0; i < returned; ++i) {
      const Perf& p = perf[static_cast<size_t>(i)];
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (deterministic_only && p.determinism != CUDNN_DETERMINISTIC) continue;
      if (math == CUDNN_FMA_MATH && p.mathType != CUDNN_FMA_MATH &&
          p.mathType != CUDNN_DEFAULT_MATH)
        continue;
      const std::optional<size_t> bytes = size_of(p.algo);
      if (!bytes || *bytes > kMaxWorkspace) continue;
      log::info(
          "conv2d: {} for {} input [{}, {}, {}, {}], kernel {}x{}x{}x{}: cuDNN algorithm {} "
          "({}{}), "
          "workspace {} bytes, {} math",
          direction, dtype_name(dtype), w.batch, w.in_h, w.in_w, w.in_c, w.kernel_h, w.kernel_w,
          w.in_c, w.out_c, static_cast<int>(p.algo), timed ? "timed: " : "heuristics",
          timed ? fmt::format("{:.3f} ms", p.time) : std::string(), *bytes, math_name(p.mathType));
      return {static_cast<int>(p.algo), *bytes, false};
    }
  log_direct(direction, dtype, w, "cuDNN offers no algorithm");
  return {0, 0, true};
}

// True when a cuDNN call succeeded; false when it declined the algorithm (which the plan then
// no longer uses: the direct kernel runs instead); any other error throws.
bool ran(cudnnStatus_t status, Algorithm& algorithm, const char* call, const char* direction,
         DType dtype, const Window2D& w) {
  if (cudnn_usable(status, call)) return true;
  algorithm.direct = true;
  log_direct(
      direction, dtype, w,
      fmt::format("{} declined its algorithm ({})", call, cudnnGetErrorString(status)).c_str());
  return false;
}

Algorithm& forward_algorithm(ConvPlan& plan, cudnnHandle_t handle, DType dtype, const Window2D& w,
                             bool timed) {
  if (plan.forward) return *plan.forward;
  int count = 0, returned = 0;
  EST_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(count));
  if (!cudnn_usable(
          (timed ? cudnnFindConvolutionForwardAlgorithm : cudnnGetConvolutionForwardAlgorithm_v7)(
              handle, plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(), count, &returned,
              perf.data()),
          timed ? "cudnnFindConvolutionForwardAlgorithm"
                : "cudnnGetConvolutionForwardAlgorithm_v7"))
    returned = 0;  // no algorithm: pick() chooses the direct kernel
  plan.forward = pick(
      perf, returned, plan.math,
      [&](cudnnConvolutionFwdAlgo_t algo) -> std::optional<size_t> {
        size_t bytes = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x.get(), plan.w.get(),
                                                    plan.conv.get(), plan.y.get(), algo,
                                                    &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      },
      timed, "forward", dtype, w);
  return *plan.forward;
}

Algorithm& backward_data_algorithm(ConvPlan& plan, cudnnHandle_t handle, DType dtype,
                                   const Window2D& w, bool timed) {
  if (plan.backward_data) return *plan.backward_data;
  int count = 0, returned = 0;
  EST_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(count));
  if (!cudnn_usable((timed ? cudnnFindConvolutionBackwardDataAlgorithm
                           : cudnnGetConvolutionBackwardDataAlgorithm_v7)(
                        handle, plan.w.get(), plan.y.get(), plan.conv.get(), plan.x.get(), count,
                        &returned, perf.data()),
                    timed ? "cudnnFindConvolutionBackwardDataAlgorithm"
                          : "cudnnGetConvolutionBackwardDataAlgorithm_v7"))
    returned = 0;  // no algorithm: pick() chooses the direct kernel
  plan.backward_data = pick(
      perf, returned, plan.math,
      [&](cudnnConvolutionBwdDataAlgo_t algo) -> std::optional<size_t> {
        size_t bytes = 0;
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w.get(), plan.y.get(),
                                                         plan.conv.get(), plan.x.get(), algo,
                                                         &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      },
      timed, "backward-data", dtype, w);
  return *plan.backward_data;
}

Algorithm& backward_filter_algorithm(ConvPlan& plan, cudnnHandle_t handle, DType dtype,
                                     const Window2D& w, bool timed) {
  if (plan.backward_filter) return *plan.backward_filter;
  int count = 0, returned = 0;
  EST_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(count));
  if (!cudnn_usable((timed ? cudnnFindConvolutionBackwardFilterAlgorithm
                           : cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
                        handle, plan.x.get(), plan.y.get(), plan.conv.get(), plan.w.get(), count,
                        &returned, perf.data()),
                    timed ? "cudnnFindConvolutionBackwardFilterAlgorithm"
                          : "cudnnGetConvolutionBackwardFilterAlgorithm_v7"))
    returned = 0;  // no algorithm: pick() chooses the direct kernel
  plan.backward_filter = pick(
      perf, returned, plan.math,
      [&](cudnnConvolutionBwdFilterAlgo_t algo) -> std::optional<size_t> {
        size_t bytes = 0;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x.get(), plan.y.get(),
                                                           plan.conv.get(), plan.w.get(), algo,
                                                           &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      },
      timed, "backward-filter", dtype, w);
  return *plan.backward_filter;
}

// Whether a direction's first call on `device` times the algorithms: autotuning is on and the
// device is not being captured (timing runs and synchronises, which a capture forbids).
bool timed(int device) { return autotune() && !capturing(device); }

// A convolution with something empty (no images, no input channels, no output positions) is
// not cuDNN's business: its output is an empty sum.
bool degenerate(const Window2D& w) {
  return w.batch == 0 || w.in_c == 0 || w.out_c == 0 || w.out_h == 0 || w.out_w == 0 ||
         w.in_h == 0 || w.in_w == 0;
}

// The HWIO kernel [KH, KW, C, OC] as KRSC [OC, KH, KW, C].
Tensor to_krsc(const Tensor& kernel, const Window2D& w, Stream stream) {
  Tensor krsc =
      Tensor::empty({w.out_c, w.kernel_h, w.kernel_w, w.in_c}, kernel.dtype(), kernel.device());
  transpose_2d(kernel.dtype(), kernel.raw_data(), krsc.raw_data(), w.kernel_h * w.kernel_w * w.in_c,
               w.out_c, stream);
  return krsc;
}

// The input with the plan's extra bottom/right zeros (the input itself when there are none).
Tensor padded_input(const Tensor& input, const ConvPlan& plan, const Window2D& w, Stream stream) {
  if (plan.extra_h == 0 && plan.extra_w == 0) return input;
  Tensor padded = Tensor::empty({w.batch, w.in_h + plan.extra_h, w.in_w + plan.extra_w, w.in_c},
                                input.dtype(), input.device());
  pad_bottom_right(input.dtype(), input.raw_data(), padded.raw_data(), w.batch, w.in_h, w.in_w,
                   w.in_c, plan.extra_h, plan.extra_w, stream);
  return padded;
}

// grad_bias [OC] = the sum of grad_pre [rows, OC] over rows (float sums in double).
void bias_sums(const Tensor& grad_pre, Tensor& grad_bias, Stream stream) {
  const int64_t channels = grad_bias.numel();
  const int64_t rows = channels == 0 ? 0 : grad_pre.numel() / channels;
  if (rows == 0)
    cuda::fill(grad_bias.dtype(), grad_bias.raw_data(), channels, 0.0, stream);
  else
    reduce_axis(ReduceOp::kSum, grad_pre, grad_bias, 1, rows, channels);
}

}  // namespace

void conv2d(const Tensor& input, const Tensor& kernel, const Tensor& bias, const Window2D& w,
            Activation activation, Tensor& output, Tensor* kernel_for_backward) {
  if (output.numel() == 0) return;
  const int device = output.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  const DType dtype = input.dtype();
  if (degenerate(w)) {
    cuda::fill(dtype, output.raw_data(), output.numel(), 0.0, stream);
  } else {
    CudnnContext& context = cudnn_context(device);
    std::lock_guard<std::mutex> lock(context.mutex);
    ConvPlan& plan = plan_for(device, dtype, w);
    Algorithm& algorithm = forward_algorithm(plan, context.handle, dtype, w, timed(device));
    bool done = false;
    if (!algorithm.direct) {
      const Tensor x = padded_input(input, plan, w, stream);
      Tensor krsc = to_krsc(kernel, w, stream);
      Tensor workspace = cudnn_workspace(device, algorithm.workspace);
      const CudnnScaling scaling(dtype);
      done = ran(cudnnConvolutionForward(context.handle, scaling.one(), plan.x.get(), x.raw_data(),
                                         plan.w.get(), krsc.raw_data(), plan.conv.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(algorithm.algo),
                                         workspace_data(workspace), algorithm.workspace,
                                         scaling.zero(), plan.y.get(), output.raw_data()),
                 algorithm, "cudnnConvolutionForward", "forward", dtype, w);
      if (done && kernel_for_backward != nullptr) *kernel_for_backward = krsc;
    }
    if (!done)
      conv_direct_forward(dtype, input.raw_data(), kernel.raw_data(), output.raw_data(),
                          window_geometry(w), stream);
  }
  bias_activation(dtype, output.raw_data(), bias.defined() ? bias.raw_data() : nullptr, activation,
                  output.numel() / w.out_c, w.out_c, stream);
}

void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& kernel_for_backward, const Window2D& w,
                          Activation /*activation*/, bool /*has_bias*/, Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  const int device = grad_input.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  const DType dtype = grad_input.dtype();
  if (degenerate(w)) {
    cuda::fill(dtype, grad_input.raw_data(), grad_input.numel(), 0.0, stream);
    return;
  }
  CudnnContext& context = cudnn_context(device);
  std::lock_guard<std::mutex> lock(context.mutex);
  ConvPlan& plan = plan_for(device, dtype, w);
  Algorithm& algorithm = backward_data_algorithm(plan, context.handle, dtype, w, timed(device));
  if (!algorithm.direct) {
    const Tensor krsc =
        kernel_for_backward.defined() ? kernel_for_backward : to_krsc(kernel, w, stream);
    const bool padded = plan.extra_h != 0 || plan.extra_w != 0;
    Tensor dx = padded
                    ? Tensor::empty({w.batch, w.in_h + plan.extra_h, w.in_w + plan.extra_w, w.in_c},
                                    dtype, grad_input.device())
                    : grad_input;
    Tensor workspace = cudnn_workspace(device, algorithm.workspace);
    const CudnnScaling scaling(dtype);
    if (ran(cudnnConvolutionBackwardData(context.handle, scaling.one(), plan.w.get(),
                                         krsc.raw_data(), plan.y.get(), grad_pre.raw_data(),
                                         plan.conv.get(),
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm.algo),
                                         workspace_data(workspace), algorithm.workspace,
                                         scaling.zero(), plan.x.get(), dx.raw_data()),
            algorithm, "cudnnConvolutionBackwardData", "backward-data", dtype, w)) {
      if (padded)
        crop_bottom_right(dtype, dx.raw_data(), grad_input.raw_data(), w.batch, w.in_h, w.in_w,
                          w.in_c, plan.extra_h, plan.extra_w, stream);
      return;
    }
  }
  conv_direct_backward_data(dtype, grad_pre.raw_data(), kernel.raw_data(), grad_input.raw_data(),
                            window_geometry(w), stream);
}

void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre, const Window2D& w,
                             Activation /*activation*/, bool /*has_bias*/, Tensor& grad_kernel,
                             Tensor* grad_bias) {
  const int device = input.device().index;
  DeviceGuard guard(device);
  const Stream stream = compute_stream(device);
  const DType dtype = input.dtype();
  if (grad_bias != nullptr) bias_sums(grad_pre, *grad_bias, stream);
  if (grad_kernel.numel() == 0) return;
  if (degenerate(w)) {
    cuda::fill(dtype, grad_kernel.raw_data(), grad_kernel.numel(), 0.0, stream);
    return;
  }
  CudnnContext& context = cudnn_context(device);
  std::lock_guard<std::mutex> lock(context.mutex);
  ConvPlan& plan = plan_for(device, dtype, w);
  Algorithm& algorithm = backward_filter_algorithm(plan, context.handle, dtype, w, timed(device));
  if (!algorithm.direct) {
    const Tensor x = padded_input(input, plan, w, stream);
    Tensor krsc =
        Tensor::empty({w.out_c, w.kernel_h, w.kernel_w, w.in_c}, dtype, grad_kernel.device());
    Tensor workspace = cudnn_workspace(device, algorithm.workspace);
    const CudnnScaling scaling(dtype);
    if (ran(cudnnConvolutionBackwardFilter(
                context.handle, scaling.one(), plan.x.get(), x.raw_data(), plan.y.get(),
                grad_pre.raw_data(), plan.conv.get(),
                static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm.algo),
                workspace_data(workspace), algorithm.workspace, scaling.zero(), plan.w.get(),
                krsc.raw_data()),
            algorithm, "cudnnConvolutionBackwardFilter", "backward-filter", dtype, w)) {
      transpose_2d(dtype, krsc.raw_data(), grad_kernel.raw_data(), w.out_c,
                   w.kernel_h * w.kernel_w * w.in_c, stream);
      return;
    }
  }
  conv_direct_backward_filter(dtype, input.raw_data(), grad_pre.raw_data(), grad_kernel.raw_data(),
                              window_geometry(w), stream);
}
void conv2d_weights_from_output(const Tensor& input, const Tensor& grad, const Tensor& y,
                                const Window2D& w, Activation activation, bool has_bias,
                                Tensor& grad_kernel, Tensor* grad_bias) {
  Tensor grad_pre = grad;
  if (activation != Activation::kNone) {
    const int device = y.device().index;
    DeviceGuard guard(device);
    grad_pre = Tensor::empty(y.shape(), y.dtype(), y.device());
    cuda::activation_gradient(y.dtype(), grad.raw_data(), y.raw_data(), grad_pre.raw_data(),
                              activation, y.numel(), compute_stream(device));
  }
  conv2d_backward_weights(input, grad_pre, w, activation, has_bias, grad_kernel, grad_bias);
}

}  // namespace est::ops::cuda
