// oneDNN kernel helpers (see kernel_util.h).
#include "ops/onednn/kernel_util.h"

#include <dnnl_debug.h>

#include "ops/onednn/context.h"

namespace est::ops::onednn {

std::string make_key(const char* prefix, std::initializer_list<int64_t> values) {
  std::string key(prefix);
  for (int64_t v : values) {
    key += '/';
    key += std::to_string(v);
  }
  return key;
}

std::string window_key(const char* prefix, const cpu::Window2D& w,
                       std::initializer_list<int64_t> extra) {
  std::string key =
      make_key(prefix, {w.batch, w.in_h, w.in_w, w.in_c, w.kernel_h, w.kernel_w, w.out_h, w.out_w,
                        w.out_c, w.stride_h, w.stride_w, w.dilation_h, w.dilation_w, w.pad_top,
                        w.pad_left, w.pad_bottom, w.pad_right});
  for (int64_t v : extra) {
    key += '/';
    key += std::to_string(v);
  }
  return key;
}

dnnl::memory::desc nhwc_desc(int64_t n, int64_t c, int64_t h, int64_t w) {
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::nhwc);
}

dnnl::primitive_attr make_attr(Activation activation) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  switch (activation) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      algorithm = dnnl::algorithm::eltwise_relu;
      break;
    case Activation::kSigmoid:
      algorithm = dnnl::algorithm::eltwise_logistic;
      break;
    case Activation::kTanh:
      algorithm = dnnl::algorithm::eltwise_tanh;
      break;
  }
  if (algorithm != dnnl::algorithm::undef) {
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(1.0f, algorithm, 0.0f, 0.0f);
    attr.set_post_ops(post_ops);
  }
  return attr;
}

Tensor buffer_for(const dnnl::memory::desc& desc) {
  const size_t bytes = desc.get_size();
  if (bytes == 0) return {};
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::kU8);
}

void execute(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd,
             std::unordered_map<int, dnnl::memory> args) {
  Tensor scratchpad = buffer_for(pd.scratchpad_desc());
  if (scratchpad.defined())
    args.emplace(DNNL_ARG_SCRATCHPAD, wrap(scratchpad, pd.scratchpad_desc()));
  try {
    primitive.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    throw InternalError(std::string("oneDNN failed to run a ") +
                        dnnl_prim_kind2str(static_cast<dnnl_primitive_kind_t>(pd.get_kind())) +
                        " primitive: " + e.what());
  }
}

ReorderPlan& cached_reorder(const std::string& key, const dnnl::memory::desc& from,
                            const dnnl::memory::desc& to) {
  return cached_plan<ReorderPlan>(key, "reorder", [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    ReorderPlan plan;
    plan.pd = dnnl::reorder::primitive_desc(engine(), from, engine(), to, attr);
    plan.primitive = dnnl::reorder(plan.pd);
    return plan;
  });
}

void reorder_into(const std::string& key, const Tensor& source, const dnnl::memory::desc& from,
                  const Tensor& target, const dnnl::memory::desc& to) {
  ReorderPlan& plan = cached_reorder(key, from, to);
  execute(plan.primitive, plan.pd,
          {{DNNL_ARG_FROM, wrap(source, from)}, {DNNL_ARG_TO, wrap(target, to)}});
}

}  // namespace est::ops::onednn
