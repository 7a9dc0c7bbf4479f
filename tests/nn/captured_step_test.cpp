// CapturedStep (nn/captured_step.h) where there is nothing to capture (CPU tensors): each run
// copies the batch into the static inputs and runs the step eagerly, and a batch that does not
// fit the inputs is refused. The capture itself is tested on a GPU (tests/ops/gpu_graph_test).
#include <doctest/doctest.h>

#include <vector>

#include "nn/captured_step.h"
#include "ops/ops.h"
#include "tests/ops/expect_error.h"

using namespace est;
using est::testing::contains;
using est::testing::error_message;

TEST_CASE("captured step: on the CPU every run copies the batch and runs the step eagerly") {
  Tensor input = Tensor::zeros({2, 3});
  Tensor total = Tensor::zeros({3});
  int calls = 0;
  nn::CapturedStep step({input}, [&] {
    ++calls;
    ops::NoGradGuard no_grad;
    ops::add_scaled_in_place(total, ops::sum(input, {0}), 1.0);
  });
  for (int s = 1; s <= 4; ++s) {
    step.run({Tensor::full({2, 3}, s)});
    CHECK(calls == s);
    CHECK(input.data<float>()[5] == doctest::Approx(s));  // the batch is in the static input
    CHECK(!step.captured());
  }
  CHECK(total.data<float>()[0] == doctest::Approx(2 * (1 + 2 + 3 + 4)));
  CHECK(step.graph_nodes() == 0);
  step.run();  // the inputs as they are
  CHECK(calls == 5);
}

TEST_CASE("captured step: the step records its tape and trains (run with a batch, run without)") {
  // A captured training step is forward, backward and update: copying the batch in must not
  // leave the step under a NoGradGuard (issue 22, defect 2: the guard covered the step too).
  Tensor input = Tensor::zeros({2, 3});
  Tensor weight = Tensor::ones({3});
  weight.set_requires_grad(true);
  int recorded = 0;
  nn::CapturedStep step({input}, [&] {
    Tensor loss = ops::sum(ops::mul(input, weight));  // d loss / d weight = column sums
    if (ops::grad_enabled() && loss.requires_grad()) ++recorded;
    for (const Tensor& gradient : ops::gradients(loss, {weight})) {
      ops::NoGradGuard no_grad;
      ops::add_scaled_in_place(weight, gradient, -0.5);
    }
  });
  step.run({Tensor::full({2, 3}, 1)});  // gradient 2 per element: weight 1 - 1 = 0
  CHECK(recorded == 1);
  CHECK(weight.data<float>()[0] == doctest::Approx(0));
  step.run();  // the same batch again: weight 0 - 1 = -1
  CHECK(recorded == 2);
  CHECK(weight.data<float>()[2] == doctest::Approx(-1));
  step.run({Tensor::full({2, 3}, 2)});  // gradient 4: weight -1 - 2 = -3
  CHECK(recorded == 3);
  CHECK(weight.data<float>()[1] == doctest::Approx(-3));
}

TEST_CASE("captured step: a batch that does not match the static inputs is refused") {
  Tensor input = Tensor::zeros({2, 3});
  nn::CapturedStep step({input}, [] {});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   step.run({Tensor::zeros({1, 3})});
                 }),
                 "batch tensor 0 is float32 [1, 3] but the static input is float32 [2, 3]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   step.run({Tensor::zeros({2, 3}, DType::kI64)});
                 }),
                 "int64 [2, 3]"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   step.run({input, input});
                 }),
                 "2 batch tensors for 1 static inputs"));
  CHECK(contains(error_message<InvalidArgumentError>([] { nn::CapturedStep({}, [] {}); }),
                 "give the static input tensors"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   nn::CapturedStep(
                       {input}, [] {}, 0);
                 }),
                 "warmup_steps is 0"));
}
