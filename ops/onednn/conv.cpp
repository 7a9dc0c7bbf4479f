// oneDNN convolution: NHWC activations given explicitly (a Tensor is always plain, and the
// brgemm/jit NHWC kernels avoid reordering the activations on every call), kernel layout left to
// oneDNN (`any`) and reordered from HWIO only when the choice differs. Bias and activation are
// fused into the forward primitive; the backward primitives are built with it as their hint.
// The forward's reordered kernel is handed back so backward-data reuses it within the step.
#include <algorithm>
#include <exception>
#include <vector>

#include "ops/cpu/parallel.h"
#include "ops/cpu/sum_in_order.h"
#include "ops/onednn/context.h"
#include "ops/onednn/kernel_util.h"
#include "ops/onednn/kernels.h"

namespace est::ops::onednn {
namespace {

using dnnl::memory;

struct ConvDescs {
  memory::desc src, weights_any, weights_user, bias, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

ConvDescs conv_descs(const cpu::Window2D& w, bool has_bias) {
  ConvDescs d;
  d.src = nhwc_desc(w.batch, w.in_c, w.in_h, w.in_w);
  d.dst = nhwc_desc(w.batch, w.out_c, w.out_h, w.out_w);
  const memory::dims weight_dims{w.out_c, w.in_c, w.kernel_h, w.kernel_w};
  d.weights_any = memory::desc(weight_dims, memory::data_type::f32, memory::format_tag::any);
  d.weights_user = memory::desc(weight_dims, memory::data_type::f32, memory::format_tag::hwio);
  if (has_bias) d.bias = memory::desc({w.out_c}, memory::data_type::f32, memory::format_tag::x);
  d.strides = {w.stride_h, w.stride_w};
  d.dilates = {w.dilation_h - 1, w.dilation_w - 1};  // oneDNN counts the gaps
  d.pad_l = {w.pad_top, w.pad_left};
  d.pad_r = {w.pad_bottom, w.pad_right};
  return d;
}

struct ConvForwardPlan {
  ConvDescs descs;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  bool reorder_weights = false;  // pd's weights layout differs from HWIO
};

ConvForwardPlan& forward_plan(const cpu::Window2D& w, Activation activation, bool has_bias) {
  const std::string key = window_key("conv_fwd", w, {static_cast<int64_t>(activation), has_bias});
  return cached_plan<ConvForwardPlan>(key, "conv2d", [&] {
    ConvForwardPlan plan;
    plan.descs = conv_descs(w, has_bias);
    const ConvDescs& d = plan.descs;
    auto desc =
        has_bias ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                       d.src, d.weights_any, d.bias, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                 : dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                       d.src, d.weights_any, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
    plan.pd = dnnl::convolution_forward::primitive_desc(desc, make_attr(activation), engine());
    plan.primitive = dnnl::convolution_forward(plan.pd);
    plan.reorder_weights = plan.pd.weights_desc() != d.weights_user;
    return plan;
  });
}

struct ConvBackwardDataPlan {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data primitive;
  bool same_weights_as_forward = false;  // can take the forward's reordered kernel
  bool reorder_weights = false;          // needs a reorder from HWIO otherwise
};

struct ConvBackwardWeightsPlan {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights primitive;
  bool reorder_weights = false;  // result must be reordered into HWIO
};

}  // namespace

void conv2d_forward(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                    const cpu::Window2D& w, Activation activation, Tensor& output,
                    Tensor* kernel_for_backward) {
  const bool has_bias = bias.defined();
  ConvForwardPlan& plan = forward_plan(w, activation, has_bias);
  const ConvDescs& d = plan.descs;
  Tensor weights = kernel;
  if (plan.reorder_weights) {
    weights = buffer_for(plan.pd.weights_desc());
    reorder_into(window_key("conv_fwd_weights", w, {static_cast<int64_t>(activation), has_bias}),
                 kernel, d.weights_user, weights, plan.pd.weights_desc());
    if (kernel_for_backward) *kernel_for_backward = weights;
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(input, d.src)},
                                       {DNNL_ARG_WEIGHTS, wrap(weights, plan.pd.weights_desc())},
                                       {DNNL_ARG_DST, wrap(output, d.dst)}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, wrap(bias, d.bias));
  execute(plan.primitive, plan.pd, std::move(args));
}

void conv2d_backward_data(const Tensor& grad_pre, const Tensor& kernel,
                          const Tensor& kernel_for_backward, const cpu::Window2D& w,
                          Activation activation, bool has_bias, Tensor& grad_input) {
  ConvForwardPlan& forward = forward_plan(w, activation, has_bias);
  const ConvDescs& d = forward.descs;
  const std::string key =
      window_key("conv_bwd_data", w, {static_cast<int64_t>(activation), has_bias});
  ConvBackwardDataPlan& plan = cached_plan<ConvBackwardDataPlan>(key, "conv2d", [&] {
    ConvBackwardDataPlan p;
    auto desc = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d.src,
                                                      d.weights_any, d.dst, d.strides, d.dilates,
                                                      d.pad_l, d.pad_r);
    dnnl::primitive_attr attr = make_attr(Activation::kNone);
    p.pd = dnnl::convolution_backward_data::primitive_desc(desc, attr, engine(), forward.pd);
    p.primitive = dnnl::convolution_backward_data(p.pd);
    p.same_weights_as_forward = p.pd.weights_desc() == forward.pd.weights_desc();
    p.reorder_weights = p.pd.weights_desc() != d.weights_user;
    return p;
  });
  Tensor weights = kernel;
  if (plan.reorder_weights) {
    if (plan.same_weights_as_forward && kernel_for_backward.defined()) {
      weights = kernel_for_backward;
    } else {
      weights = buffer_for(plan.pd.weights_desc());
      reorder_into(
          window_key("conv_bwd_data_weights", w, {static_cast<int64_t>(activation), has_bias}),
          kernel, d.weights_user, weights, plan.pd.weights_desc());
    }
  }
  execute(plan.primitive, plan.pd,
          {{DNNL_ARG_DIFF_DST, wrap(grad_pre, d.dst)},
           {DNNL_ARG_WEIGHTS, wrap(weights, plan.pd.weights_desc())},
           {DNNL_ARG_DIFF_SRC, wrap(grad_input, d.src)}});
}

namespace {

// Output positions (images x OH x OW) at least in a part of the kernel gradient's batch, so that
// each primitive call is worth its fixed cost.
constexpr int64_t kMinPositionsPerPart = 1024;

// The kernel (and bias) gradient of the w.batch images from image `first` of input and
// grad_pre, on the threads OpenMP gives the calling thread.
void backward_weights_of(const Tensor& input, const Tensor& grad_pre, int64_t first,
                         const cpu::Window2D& w, Activation activation, bool has_bias,
                         Tensor& grad_kernel, Tensor* grad_bias) {
  ConvForwardPlan& forward = forward_plan(w, activation, has_bias);
  const bool with_bias = grad_bias != nullptr;
  ConvDescs d = conv_descs(w, with_bias);
  const std::string key =
      window_key("conv_bwd_weights", w, {static_cast<int64_t>(activation), has_bias, with_bias});
  ConvBackwardWeightsPlan& plan = cached_plan<ConvBackwardWeightsPlan>(key, "conv2d", [&] {
    ConvBackwardWeightsPlan p;
    auto desc = with_bias ? dnnl::convolution_backward_weights::desc(
                                dnnl::algorithm::convolution_direct, d.src, d.weights_any, d.bias,
                                d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                          : dnnl::convolution_backward_weights::desc(
                                dnnl::algorithm::convolution_direct, d.src, d.weights_any, d.dst,
                                d.strides, d.dilates, d.pad_l, d.pad_r);
    p.pd = dnnl::convolution_backward_weights::primitive_desc(desc, make_attr(Activation::kNone),
                                                              engine(), forward.pd);
    p.primitive = dnnl::convolution_backward_weights(p.pd);
    p.reorder_weights = p.pd.diff_weights_desc() != d.weights_user;
    return p;
  });
  Tensor weights = plan.reorder_weights ? buffer_for(plan.pd.diff_weights_desc()) : grad_kernel;
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, wrap_at(input, first * w.in_h * w.in_w * w.in_c, d.src)},
      {DNNL_ARG_DIFF_DST, wrap_at(grad_pre, first * w.out_h * w.out_w * w.out_c, d.dst)},
      {DNNL_ARG_DIFF_WEIGHTS, wrap(weights, plan.pd.diff_weights_desc())}};
  if (with_bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(*grad_bias, d.bias));
  execute(plan.primitive, plan.pd, std::move(args));
  if (plan.reorder_weights)
    reorder_into(window_key("conv_bwd_weights_reorder", w,
                            {static_cast<int64_t>(activation), has_bias, with_bias}),
                 weights, plan.pd.diff_weights_desc(), grad_kernel, d.weights_user);
}

// out[i] = the sum of parts[p][i] over p, in order, starting from part 0's value (init -0).
void sum_parts(const std::vector<Tensor>& parts, Tensor& out) {
  float* total = out.data<float>();
  cpu::sum_in_order<float>(
      static_cast<int64_t>(parts.size()), out.numel(),
      [&](int64_t p) { return parts[static_cast<size_t>(p)].data<float>(); },
      [&](int64_t i, float sum) { total[i] = sum; }, -0.0f);
}

}  // namespace

// oneDNN splits the sum over the batch by its thread count, so another count would round the
// gradient differently. Instead the batch is cut into a fixed number of parts (from the shape
// alone, cpu::fixed_parts), each summed by a primitive on one thread, and the parts' gradients
// are added in order: the same bits however many threads ran them (DESIGN).
void conv2d_backward_weights(const Tensor& input, const Tensor& grad_pre, const cpu::Window2D& w,
                             Activation activation, bool has_bias, Tensor& grad_kernel,
                             Tensor* grad_bias) {
  const int64_t positions = std::max<int64_t>(1, w.out_h * w.out_w);
  const int64_t parts =
      cpu::fixed_parts(w.batch, (kMinPositionsPerPart + positions - 1) / positions);
  if (parts == 1) {
    const cpu::SerialScope one_thread(true);
    backward_weights_of(input, grad_pre, 0, w, activation, has_bias, grad_kernel, grad_bias);
    return;
  }
  std::vector<Tensor> kernels(static_cast<size_t>(parts)), biases(kernels.size());
  std::vector<std::exception_ptr> errors(kernels.size());  // none may leave the parallel region
  cpu::parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    const cpu::SerialScope one_thread(true);
    for (int64_t p = begin; p < end; ++p) {
      const auto at = static_cast<size_t>(p);
      try {
        const int64_t first = w.batch * p / parts;
        cpu::Window2D part = w;
        part.batch = w.batch * (p + 1) / parts - first;
        kernels[at] = Tensor::empty(grad_kernel.shape());
        if (grad_bias) biases[at] = Tensor::empty(grad_bias->shape());
        backward_weights_of(input, grad_pre, first, part, activation, has_bias, kernels[at],
                            grad_bias ? &biases[at] : nullptr);
      } catch (...) {
        errors[at] = std::current_exception();
      }
    }
  });
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  sum_parts(kernels, grad_kernel);
  if (grad_bias) sum_parts(biases, *grad_bias);
}

}  // namespace est::ops::onednn
