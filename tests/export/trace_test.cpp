// The tracer (export/trace.h): a kernel the ONNX emitter has a form for is recorded from its
// arguments by their types (tensors read as inputs, tensors written as outputs, doubles, ints,
// bools and the matmul's transposes as attributes); a kernel without one is an unsupported node
// that reads nothing, so only its outputs can be refused.
#include <doctest/doctest.h>

#include <algorithm>

#include "export/trace.h"
#include "ops/ops.h"

namespace {

using est::Tensor;
using est::ops::OpId;
using est::serving::NodeKind;
using est::serving::TracedNode;
namespace ops = est::ops;

const TracedNode& node_of(const est::serving::Trace& trace, OpId op) {
  auto found = std::find_if(trace.nodes.begin(), trace.nodes.end(), [op](const TracedNode& n) {
    return n.kind != NodeKind::kReshape && n.op == op;
  });
  REQUIRE(found != trace.nodes.end());
  return *found;
}

}  // namespace

TEST_CASE("trace: kernels are recorded from their arguments by type, the others unsupported") {
  const Tensor weights = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  est::ops::Generator generator(5);
  auto fn = [&](const est::serving::NamedTensors& in) -> est::serving::NamedTensors {
    const Tensor hot = ops::one_hot(in.at("ids"), 3, 2.0, -1.0);
    const Tensor y = ops::log_softmax(ops::matmul(hot, weights, false, true), 1);
    return {{"y", y}, {"dropped", ops::dropout(y, 0.5, generator)}};
  };
  const est::serving::Trace trace =
      est::serving::trace(fn, {{"ids", Tensor::from_vector(std::vector<int64_t>{0, 2}, {2})}});

  CHECK(est::serving::has_onnx_form(OpId::kOneHot));
  CHECK_FALSE(est::serving::has_onnx_form(OpId::kDropoutMask));
  const TracedNode& hot = node_of(trace, OpId::kOneHot);
  CHECK(hot.kind == NodeKind::kKernel);
  CHECK(hot.inputs == std::vector<int>{trace.inputs.at("ids")});
  CHECK(hot.reals == std::vector<double>{2.0, -1.0});
  REQUIRE(hot.outputs.size() == 1);
  const TracedNode& matmul = node_of(trace, OpId::kMatmul);
  CHECK(matmul.inputs.size() == 3);
  CHECK(matmul.inputs[0] == hot.outputs[0]);
  CHECK(matmul.inputs[2] == -1);  // no bias
  CHECK_FALSE(matmul.flag_a);
  CHECK(matmul.flag_b);
  const TracedNode& softmax = node_of(trace, OpId::kSoftmax);
  CHECK(softmax.ints == std::vector<int64_t>{1});
  CHECK(softmax.flag_a);  // log
  CHECK(softmax.outputs == std::vector<int>{trace.outputs.at("y")});
  const TracedNode& mask = node_of(trace, OpId::kDropoutMask);
  CHECK(mask.kind == NodeKind::kUnsupported);
  CHECK(mask.inputs.empty());
  CHECK(mask.outputs.size() == 1);
}
