// oneDNN eltwise primitives for relu, sigmoid, tanh, exp, log, sqrt and abs (float32).
//
// An elementwise op does not care about shape, so every tensor is presented to oneDNN as 1-D
// and primitives are cached by op and element count only. Where oneDNN offers a
// "use_dst_for_bwd" variant (sigmoid, tanh, exp, sqrt) the backward reads the forward output,
// which is what the reference kernels save too; relu, log and abs read the input.
#include <fmt/format.h>

#include "ops/onednn/context.h"
#include "ops/onednn/kernels.h"
#include "ops/onednn/primitive_plan.h"

namespace est::ops::onednn {
namespace {

dnnl::algorithm algorithm_of(Eltwise kind) {
  using dnnl::algorithm;
  switch (kind) {
    case Eltwise::kRelu:
      return algorithm::eltwise_relu;
    case Eltwise::kSigmoid:
      return algorithm::eltwise_logistic_use_dst_for_bwd;
    case Eltwise::kTanh:
      return algorithm::eltwise_tanh_use_dst_for_bwd;
    case Eltwise::kExp:
      return algorithm::eltwise_exp_use_dst_for_bwd;
    case Eltwise::kLog:
      return algorithm::eltwise_log;
    case Eltwise::kSqrt:
      return algorithm::eltwise_sqrt_use_dst_for_bwd;
    case Eltwise::kAbs:
      return algorithm::eltwise_abs;
  }
  throw InternalError("onednn eltwise: unknown kind");
}

using Forward = PrimitivePlan<dnnl::eltwise_forward>;
using Backward = PrimitivePlan<dnnl::eltwise_backward>;

dnnl::memory::desc flat_desc(int64_t n) { return plain_desc({n}, dnnl::memory::format_tag::a); }

Forward& forward_for(Eltwise kind, int64_t n) {
  return cached<Forward>(fmt::format("eltwise_forward/{}/{}", static_cast<int>(kind), n), [&] {
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, algorithm_of(kind),
                                     flat_desc(n));
    dnnl::eltwise_forward::primitive_desc pd(desc, engine());
    return Forward{pd, dnnl::eltwise_forward(pd)};
  });
}

void require_f32(const char* what, const Tensor& t) {
  if (t.dtype() != DType::kF32)
    throw InternalError(
        fmt::format("onednn {}: expected float32, got {}", what, dtype_name(t.dtype())));
}

}  // namespace

static bool eltwise_backward_uses_output(Eltwise kind) {
  switch (kind) {
    case Eltwise::kSigmoid:
    case Eltwise::kTanh:
    case Eltwise::kExp:
    case Eltwise::kSqrt:
      return true;
    default:
      return false;
  }
}

void eltwise_forward(Eltwise kind, const Tensor& x, Tensor& y) {
  require_f32("eltwise_forward", x);
  const int64_t n = x.numel();
  Forward& forward = forward_for(kind, n);
  dnnl::memory::desc desc = flat_desc(n);
  forward.primitive.execute(stream(),
                            {{DNNL_ARG_SRC, wrap(x, desc)}, {DNNL_ARG_DST, wrap(y, desc)}});
  stream().wait();
}

void eltwise_backward(Eltwise kind, const Tensor& grad_output, const Tensor& saved, Tensor& dx) {
  require_f32("eltwise_backward", grad_output);
  require_f32("eltwise_backward", saved);
  const int64_t n = saved.numel();
  if (grad_output.numel() != n)
    throw InternalError(
        fmt::format("onednn eltwise_backward: gradient of shape {} for a tensor "
                    "of shape {}",
                    shape_str(grad_output.shape()), shape_str(saved.shape())));
  Backward& backward =
      cached<Backward>(fmt::format("eltwise_backward/{}/{}", static_cast<int>(kind), n), [&] {
        dnnl::eltwise_backward::desc desc(algorithm_of(kind), flat_desc(n), flat_desc(n));
        dnnl::eltwise_backward::primitive_desc pd(desc, engine(), forward_for(kind, n).desc);
        return Backward{pd, dnnl::eltwise_backward(pd)};
      });
  dnnl::memory::desc desc = flat_desc(n);
  const int saved_arg = eltwise_backward_uses_output(kind) ? DNNL_ARG_DST : DNNL_ARG_SRC;
  backward.primitive.execute(stream(), {{saved_arg, wrap(saved, desc)},
                                        {DNNL_ARG_DIFF_DST, wrap(grad_output, desc)},
                                        {DNNL_ARG_DIFF_SRC, wrap(dx, desc)}});
  stream().wait();
}

}  // namespace est::ops::onednn
