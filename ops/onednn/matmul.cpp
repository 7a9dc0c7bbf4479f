// oneDNN matmul for matmul() and linear(): plain row-major operands, transposes expressed as
// strides (no copies), bias and activation fused as post-ops. A non-batched operand of a
// batched product is broadcast through a batch dimension of 1. float32, or bfloat16 throughout
// (operands, bias, output) where the CPU has AVX-512 (ops/onednn/register.cpp checks).
#include "ops/cpu/parallel.h"
#include "ops/onednn/context.h"
#include "ops/onednn/kernel_util.h"
#include "ops/onednn/kernels.h"

namespace est::ops::onednn {
namespace {

using dnnl::memory;

memory::data_type data_type_of(DType dtype) {
  return dtype == DType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// Row-major [batch, rows, cols], or its transpose stored as [batch, cols, rows].
memory::desc operand_desc(int64_t batch, int64_t rows, int64_t cols, bool transposed, bool three_d,
                          memory::data_type type) {
  const int64_t row_stride = transposed ? 1 : cols, col_stride = transposed ? rows : 1;
  if (!three_d) return memory::desc({rows, cols}, type, {row_stride, col_stride});
  return memory::desc({batch, rows, cols}, type, {rows * cols, row_stride, col_stride});
}

struct MatmulPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  memory::desc a, b, bias, out;
};

// `type`: f32, or bf16 for bfloat16 operands, bias and output (oneDNN accumulates in f32 and
// rounds each output once).
MatmulPlan make_plan(const cpu::MatmulDims& d, bool has_bias, Activation activation,
                     memory::data_type type) {
  const bool three_d = d.batch > 1;
  MatmulPlan plan;
  plan.a = operand_desc(d.a_batched ? d.batch : 1, d.m, d.k, d.transpose_a, three_d, type);
  plan.b = operand_desc(d.b_batched ? d.batch : 1, d.k, d.n, d.transpose_b, three_d, type);
  plan.out = operand_desc(d.batch, d.m, d.n, false, three_d, type);
  if (has_bias)
    plan.bias = three_d ? memory::desc({1, 1, d.n}, type, memory::format_tag::abc)
                        : memory::desc({1, d.n}, type, memory::format_tag::ab);
  dnnl::matmul::desc desc = has_bias ? dnnl::matmul::desc(plan.a, plan.b, plan.bias, plan.out)
                                     : dnnl::matmul::desc(plan.a, plan.b, plan.out);
  plan.pd = dnnl::matmul::primitive_desc(desc, make_attr(activation), engine());
  plan.primitive = dnnl::matmul(plan.pd);
  return plan;
}

}  // namespace

bool matmul_runs_serially(const cpu::MatmulDims& d) {
  return 2 * d.batch * d.m * d.n * d.k < kSerialMatmulFlops;
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const cpu::MatmulDims& d, Activation activation) {
  // Small products on the calling thread (the plan is cached per thread count, context.h).
  const cpu::SerialScope serial(matmul_runs_serially(d));
  const bool has_bias = bias.defined();
  const memory::data_type type = data_type_of(out.dtype());
  const std::string key = make_key(
      "matmul", {d.batch, d.m, d.n, d.k, d.a_batched, d.b_batched, d.transpose_a, d.transpose_b,
                 has_bias, static_cast<int64_t>(activation), static_cast<int64_t>(type)});
  MatmulPlan& plan = cached_plan<MatmulPlan>(
      key, "matmul", [&] { return make_plan(d, has_bias, activation, type); });
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(a, plan.a)},
                                       {DNNL_ARG_WEIGHTS, wrap(b, plan.b)},
                                       {DNNL_ARG_DST, wrap(out, plan.out)}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, wrap(bias, plan.bias));
  execute(plan.primitive, plan.pd, std::move(args));
}

}  // namespace est::ops::onednn
