// Results that must not depend on the thread count (DESIGN: a seeded run is bitwise reproducible
// however many threads ran each step, and the thread governor changes that count at any moment).
// Each case runs the ops of the tutorial CNN's training step (examples/cnn_model.h at batch 64:
// conv2d, max pooling, dense layers, bias gradients, the sparse cross entropy and its mean)
// forward and backward on 1, 2 and 3 threads, on every CPU backend, and compares the outputs
// and gradients bit for bit. Large enough shapes that every kernel splits its work.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/ops.h"

namespace {

using namespace est::ops;

struct ThreadCase {
  std::string name;
  std::vector<Shape> shapes;  // float inputs, uniform in [-1, 1), all differentiable
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

// The forward output followed by the gradients of sum(output * w) for a fixed random w.
std::vector<Tensor> outputs_and_gradients(const ThreadCase& c) {
  Generator generator(11);
  std::vector<Tensor> inputs;
  for (const Shape& shape : c.shapes) {
    inputs.push_back(random_uniform(shape, -1.0, 1.0, generator));
    inputs.back().set_requires_grad(true);
  }
  Tensor out = c.run(inputs);
  Tensor weights = random_uniform(out.shape(), -1.0, 1.0, generator, out.dtype());
  std::vector<Tensor> results = gradients(sum(mul(out, weights)), inputs);
  results.insert(results.begin(), out.detach());
  return results;
}

std::vector<Tensor> on_threads(const ThreadCase& c, int threads) {
  const int previous = num_threads();
  set_num_threads(threads);
  std::vector<Tensor> results = outputs_and_gradients(c);
  set_num_threads(previous);
  return results;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

Tensor labels_for(int64_t rows, int64_t classes) {
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = (i * 7 + 3) % classes;
  return Tensor::from_vector<int64_t>(ids);
}

std::vector<ThreadCase> cnn_step_cases() {
  const Conv2DParams with_relu{.activation = Activation::kRelu};
  return {
      {"conv2d 28x28x1 -> 32, bias, relu (the first layer)",
       {{64, 28, 28, 1}, {3, 3, 1, 32}, {32}},
       [with_relu](const auto& in) { return conv2d(in[0], in[1], in[2], with_relu); }},
      {"conv2d 13x13x32 -> 64, bias, relu",
       {{64, 13, 13, 32}, {3, 3, 32, 64}, {64}},
       [with_relu](const auto& in) { return conv2d(in[0], in[1], in[2], with_relu); }},
      {"conv2d 13x13x32 -> 64 without bias",
       {{64, 13, 13, 32}, {3, 3, 32, 64}},
       [](const auto& in) { return conv2d(in[0], in[1], Tensor(), {}); }},
      {"max_pool2d 2x2 of [64, 26, 26, 32]",
       {{64, 26, 26, 32}},
       [](const auto& in) { return max_pool2d(in[0], {}); }},
      {"dense 5408 -> 64, bias, relu",
       {{64, 5408}, {5408, 64}, {64}},
       [](const auto& in) { return linear(in[0], in[1], in[2], Activation::kRelu); }},
      {"dense 64 -> 10, bias",
       {{64, 64}, {64, 10}, {10}},
       [](const auto& in) { return linear(in[0], in[1], in[2]); }},
      {"matmul [256, 1024] x [1024, 512]",
       {{256, 1024}, {1024, 512}},
       [](const auto& in) { return matmul(in[0], in[1]); }},
      {"matmul [8, 32768] x [32768, 8] (a long inner dimension)",
       {{8, 32768}, {32768, 8}},
       [](const auto& in) { return matmul(in[0], in[1]); }},
      {"bias_add on [43264, 32]",
       {{43264, 32}, {32}},
       [](const auto& in) { return bias_add(in[0], in[1]); }},
      {"relu of [64, 26, 26, 32]", {{64, 26, 26, 32}}, [](const auto& in) { return relu(in[0]); }},
      {"mean sparse softmax cross entropy of [64, 10]",
       {{64, 10}},
       [](const auto& in) {
         return mean(sparse_softmax_cross_entropy_with_logits(labels_for(64, 10), in[0]));
       }},
      {"sum and mean over every axis of [64, 26, 26, 32]",
       {{64, 26, 26, 32}},
       [](const auto& in) { return add(sum(in[0]), mean(in[0])); }},
      {"sum over the batch of [64, 26, 26, 32]",
       {{64, 26, 26, 32}},
       [](const auto& in) { return sum(in[0], {0}); }},
      {"batch norm training on [64, 13, 13, 32]",
       {{64, 13, 13, 32}, {32}, {32}},
       [](const auto& in) { return batch_norm_training(in[0], in[1], in[2], 1e-3).output; }},
  };
}

TEST_CASE("threads: the CNN step's ops give bitwise equal results on 1, 2 and 3 threads") {
  for (Backend backend : available_cpu_backends()) {
    BackendGuard guard(backend);
    for (const ThreadCase& c : cnn_step_cases()) {
      const std::vector<Tensor> one = on_threads(c, 1);
      for (int threads : {2, 3}) {
        const std::vector<Tensor> many = on_threads(c, threads);
        REQUIRE(many.size() == one.size());
        for (size_t k = 0; k < one.size(); ++k) {
          INFO(fmt::format(
              "{} on {}, {} threads: {}", c.name, backend_name(backend), threads,
              k == 0 ? std::string("forward output") : fmt::format("gradient of input {}", k - 1)));
          CHECK(bitwise_equal(one[k], many[k]));
        }
      }
    }
  }
}

}  // namespace
