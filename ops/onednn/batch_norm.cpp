// oneDNN batch normalization. Any [..., C] tensor is the NHWC memory of dims {rows, C, 1, 1}, so
// dense outputs and images share one primitive family. gamma and beta map to the separate
// use_scale / use_shift flags of oneDNN 2.6, so either may be absent. Inference passes the
// moving statistics in (use_global_stats); its backward treats them as constants.
// oneDNN splits its per-channel sums (the training statistics, the gradients of gamma and beta,
// which the input's gradient uses) by its thread count, so they would round differently on
// another count: training takes its statistics and its gradients from the reference kernels,
// whose sums run over parts fixed by the shape (cpu/batch_norm_reference.h), and oneDNN
// normalizes with them, which is elementwise (DESIGN: results never depend on the thread count).
#include <bit>

#include "ops/cpu/batch_norm_reference.h"
#include "ops/onednn/context.h"
#include "ops/onednn/kernel_util.h"
#include "ops/onednn/kernels.h"

namespace est::ops::onednn {
namespace {

using dnnl::memory;
using Flags = dnnl::normalization_flags;

Flags flags_for(const Tensor& gamma, const Tensor& beta, bool training) {
  Flags flags = Flags::none;
  if (gamma.defined()) flags |= Flags::use_scale;
  if (beta.defined()) flags |= Flags::use_shift;
  if (!training) flags |= Flags::use_global_stats;
  return flags;
}

// Exactly the epsilon oneDNN receives, for cache keys (printing it could round 1e-9 to 0).
int64_t epsilon_bits(double epsilon) { return std::bit_cast<int32_t>(static_cast<float>(epsilon)); }

struct BatchNormForwardPlan {
  memory::desc data, stats;
  dnnl::batch_normalization_forward::primitive_desc pd;
  dnnl::batch_normalization_forward primitive;
};

// `training`: prop_kind::forward_training, which backward primitives want as their hint (with
// use_global_stats too, for the gradient of inference).
BatchNormForwardPlan& forward_plan(int64_t rows, int64_t channels, double epsilon, Flags flags,
                                   bool training) {
  const std::string key = make_key("batch_norm_fwd", {rows, channels, static_cast<int64_t>(flags),
                                                      training, epsilon_bits(epsilon)});
  return cached_plan<BatchNormForwardPlan>(key, "batch_norm", [&] {
    BatchNormForwardPlan plan;
    plan.data = nhwc_desc(rows, channels, 1, 1);
    plan.stats = memory::desc({channels}, memory::data_type::f32, memory::format_tag::x);
    auto desc = dnnl::batch_normalization_forward::desc(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
        plan.data, static_cast<float>(epsilon), flags);
    plan.pd = dnnl::batch_normalization_forward::primitive_desc(desc, make_attr(Activation::kNone),
                                                                engine());
    plan.primitive = dnnl::batch_normalization_forward(plan.pd);
    return plan;
  });
}

struct BatchNormBackwardPlan {
  dnnl::batch_normalization_backward::primitive_desc pd;
  dnnl::batch_normalization_backward primitive;
};

int64_t channels_of(const Tensor& x) { return x.dim(-1); }
int64_t rows_of(const Tensor& x) { return channels_of(x) ? x.numel() / channels_of(x) : 0; }

}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& mean,
                        Tensor& variance, double epsilon, bool training, Tensor& y) {
  const int64_t channels = channels_of(x), rows = rows_of(x);
  if (training) cpu::batch_norm_statistics_reference(x, mean, variance);
  BatchNormForwardPlan& plan =
      forward_plan(rows, channels, epsilon, flags_for(gamma, beta, /*training=*/false), false);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(x, plan.data)},
                                       {DNNL_ARG_DST, wrap(y, plan.data)},
                                       {DNNL_ARG_MEAN, wrap(mean, plan.stats)},
                                       {DNNL_ARG_VARIANCE, wrap(variance, plan.stats)}};
  if (gamma.defined()) args.emplace(DNNL_ARG_SCALE, wrap(gamma, plan.stats));
  if (beta.defined()) args.emplace(DNNL_ARG_SHIFT, wrap(beta, plan.stats));
  execute(plan.primitive, plan.pd, std::move(args));
}

void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& grad_y,
                         double epsilon, bool training, Tensor* grad_x, Tensor* grad_gamma,
                         Tensor* grad_beta) {
  if (training) {
    cpu::batch_norm_backward_reference(x, gamma, mean, variance, grad_y, epsilon, true, grad_x,
                                       grad_gamma, grad_beta);
    return;
  }
  const int64_t channels = channels_of(x), rows = rows_of(x);
  const Flags flags = flags_for(gamma, beta, training);
  BatchNormForwardPlan& forward = forward_plan(rows, channels, epsilon, flags, /*training=*/true);
  // With a scale or shift, prop_kind::backward also yields their gradients.
  const bool with_parameters = gamma.defined() || beta.defined();
  const std::string key = make_key(
      "batch_norm_bwd", {rows, channels, static_cast<int64_t>(flags), epsilon_bits(epsilon)});
  BatchNormBackwardPlan& plan = cached_plan<BatchNormBackwardPlan>(key, "batch_norm", [&] {
    BatchNormBackwardPlan p;
    auto desc = dnnl::batch_normalization_backward::desc(
        with_parameters ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, forward.data,
        forward.data, static_cast<float>(epsilon), flags);
    p.pd = dnnl::batch_normalization_backward::primitive_desc(desc, make_attr(Activation::kNone),
                                                              engine(), forward.pd);
    p.primitive = dnnl::batch_normalization_backward(p.pd);
    return p;
  });
  // oneDNN always writes every gradient it computes; unwanted ones go to scratch tensors.
  Tensor dx = grad_x ? *grad_x : Tensor::empty(x.shape());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(x, forward.data)},
                                       {DNNL_ARG_DIFF_DST, wrap(grad_y, forward.data)},
                                       {DNNL_ARG_MEAN, wrap(mean, forward.stats)},
                                       {DNNL_ARG_VARIANCE, wrap(variance, forward.stats)},
                                       {DNNL_ARG_DIFF_SRC, wrap(dx, forward.data)}};
  Tensor dgamma, dbeta;
  if (gamma.defined()) {
    dgamma = grad_gamma ? *grad_gamma : Tensor::empty({channels});
    args.emplace(DNNL_ARG_SCALE, wrap(gamma, forward.stats));
    args.emplace(DNNL_ARG_DIFF_SCALE, wrap(dgamma, forward.stats));
  }
  if (beta.defined()) {
    dbeta = grad_beta ? *grad_beta : Tensor::empty({channels});
    args.emplace(DNNL_ARG_SHIFT, wrap(beta, forward.stats));
    args.emplace(DNNL_ARG_DIFF_SHIFT, wrap(dbeta, forward.stats));
  }
  execute(plan.primitive, plan.pd, std::move(args));
}

}  // namespace est::ops::onednn
