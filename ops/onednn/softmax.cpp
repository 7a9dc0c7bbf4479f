// oneDNN softmax / log-softmax over the last axis (float32), forward and backward.
//
// The tensor is presented as [rows, classes] and primitives are cached by algorithm and that
// pair; the backward primitive takes the forward one as its hint and reads the forward output.
#include <fmt/format.h>

#include "ops/onednn/context.h"
#include "ops/onednn/kernels.h"
#include "ops/onednn/primitive_plan.h"

namespace est::ops::onednn {
namespace {

using Forward = PrimitivePlan<dnnl::softmax_v2_forward>;
using Backward = PrimitivePlan<dnnl::softmax_v2_backward>;

struct Rows {
  int64_t rows, classes;
  std::string key(const char* what, bool log) const {
    return fmt::format("{}/{}/{}x{}", what, log ? "log" : "accurate", rows, classes);
  }
  dnnl::memory::desc desc() const {
    return plain_desc({rows, classes}, dnnl::memory::format_tag::ab);
  }
};

Rows rows_of(const Tensor& t) {
  if (t.dtype() != DType::kF32 || t.rank() == 0 || t.numel() == 0)
    throw InternalError(fmt::format("onednn softmax: unsupported tensor {}", t.str(0)));
  int64_t classes = t.shape().back();
  return {t.numel() / classes, classes};
}

dnnl::algorithm algorithm_of(bool log) {
  return log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
}

Forward& forward_for(const Rows& rows, bool log) {
  return cached<Forward>(rows.key("softmax_forward", log), [&] {
    dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_training, algorithm_of(log),
                                        rows.desc(), rows.desc(), 1);
    dnnl::softmax_v2_forward::primitive_desc pd(desc, engine());
    return Forward{pd, dnnl::softmax_v2_forward(pd)};
  });
}

}  // namespace

void softmax_forward(const Tensor& logits, bool log, Tensor& out) {
  const Rows rows = rows_of(logits);
  Forward& forward = forward_for(rows, log);
  forward.primitive.execute(stream(), {{DNNL_ARG_SRC, wrap(logits, rows.desc())},
                                       {DNNL_ARG_DST, wrap(out, rows.desc())}});
  stream().wait();
}

void softmax_backward(const Tensor& grad_output, const Tensor& output, bool log, Tensor& dx) {
  const Rows rows = rows_of(output);
  if (grad_output.shape() != output.shape() || grad_output.dtype() != DType::kF32)
    throw InternalError(fmt::format("onednn softmax_backward: gradient {} for output {}",
                                    grad_output.str(0), output.str(0)));
  Backward& backward = cached<Backward>(rows.key("softmax_backward", log), [&] {
    dnnl::softmax_v2_backward::desc desc(algorithm_of(log), rows.desc(), rows.desc(), rows.desc(),
                                         1);
    dnnl::softmax_v2_backward::primitive_desc pd(desc, engine(), forward_for(rows, log).desc);
    return Backward{pd, dnnl::softmax_v2_backward(pd)};
  });
  backward.primitive.execute(stream(), {{DNNL_ARG_DST, wrap(output, rows.desc())},
                                        {DNNL_ARG_DIFF_DST, wrap(grad_output, rows.desc())},
                                        {DNNL_ARG_DIFF_SRC, wrap(dx, rows.desc())}});
  stream().wait();
}

}  // namespace est::ops::onednn
