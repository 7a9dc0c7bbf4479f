// oneDNN max / average pooling over NHWC tensors. Training max pooling keeps oneDNN's workspace
// (where each maximum came from), which the caller hands back to backward; inference pooling
// builds a workspace-free primitive. Average pooling excludes padding, as TensorFlow does.
#include "ops/onednn/context.h"
#include "ops/onednn/kernel_util.h"
#include "ops/onednn/kernels.h"

namespace est::ops::onednn {
namespace {

using dnnl::memory;

struct PoolDescs {
  memory::desc src, dst;
  memory::dims strides, kernel, pad_l, pad_r;
  dnnl::algorithm algorithm;
};

PoolDescs pool_descs(const cpu::Window2D& w, cpu::PoolKind kind) {
  return {nhwc_desc(w.batch, w.in_c, w.in_h, w.in_w),
          nhwc_desc(w.batch, w.out_c, w.out_h, w.out_w),
          {w.stride_h, w.stride_w},
          {w.kernel_h, w.kernel_w},
          {w.pad_top, w.pad_left},
          {w.pad_bottom, w.pad_right},
          kind == cpu::PoolKind::kMax ? dnnl::algorithm::pooling_max
                                      : dnnl::algorithm::pooling_avg_exclude_padding};
}

struct PoolForwardPlan {
  PoolDescs descs;
  dnnl::pooling_forward::primitive_desc pd;
  dnnl::pooling_forward primitive;
};

PoolForwardPlan& forward_plan(const cpu::Window2D& w, cpu::PoolKind kind, bool training) {
  const std::string key =
      window_key("pool_fwd", w, {static_cast<int64_t>(kind), static_cast<int64_t>(training)});
  return cached_plan<PoolForwardPlan>(key, "pooling", [&] {
    PoolForwardPlan plan;
    plan.descs = pool_descs(w, kind);
    const PoolDescs& d = plan.descs;
    auto desc = dnnl::pooling_forward::desc(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
        d.algorithm, d.src, d.dst, d.strides, d.kernel, d.pad_l, d.pad_r);
    plan.pd = dnnl::pooling_forward::primitive_desc(desc, make_attr(Activation::kNone), engine());
    plan.primitive = dnnl::pooling_forward(plan.pd);
    return plan;
  });
}

struct PoolBackwardPlan {
  dnnl::pooling_backward::primitive_desc pd;
  dnnl::pooling_backward primitive;
};

}  // namespace

void pool2d_forward(const Tensor& input, const cpu::Window2D& w, cpu::PoolKind kind, bool training,
                    Tensor& output, Tensor& workspace) {
  PoolForwardPlan& plan = forward_plan(w, kind, training);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(input, plan.descs.src)},
                                       {DNNL_ARG_DST, wrap(output, plan.descs.dst)}};
  if (training && kind == cpu::PoolKind::kMax) {
    workspace = buffer_for(plan.pd.workspace_desc());
    if (workspace.defined())
      args.emplace(DNNL_ARG_WORKSPACE, wrap(workspace, plan.pd.workspace_desc()));
  }
  execute(plan.primitive, plan.pd, std::move(args));
}

void pool2d_backward(const Tensor& grad_output, const Tensor& workspace, const cpu::Window2D& w,
                     cpu::PoolKind kind, Tensor& grad_input) {
  PoolForwardPlan& forward = forward_plan(w, kind, /*training=*/true);
  const PoolDescs& d = forward.descs;
  const std::string key = window_key("pool_bwd", w, {static_cast<int64_t>(kind)});
  PoolBackwardPlan& plan = cached_plan<PoolBackwardPlan>(key, "pooling", [&] {
    PoolBackwardPlan p;
    auto desc = dnnl::pooling_backward::desc(d.algorithm, d.src, d.dst, d.strides, d.kernel,
                                             d.pad_l, d.pad_r);
    p.pd = dnnl::pooling_backward::primitive_desc(desc, make_attr(Activation::kNone), engine(),
                                                  forward.pd);
    p.primitive = dnnl::pooling_backward(p.pd);
    return p;
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, wrap(grad_output, d.dst)},
                                       {DNNL_ARG_DIFF_SRC, wrap(grad_input, d.src)}};
  if (kind == cpu::PoolKind::kMax)
    args.emplace(DNNL_ARG_WORKSPACE, wrap(workspace, plan.pd.workspace_desc()));
  execute(plan.primitive, plan.pd, std::move(args));
}

}  // namespace est::ops::onednn
