// Cross-checks against PyTorch, whose SGD with Nesterov momentum is TF1's update exactly
// (buf = m * buf + g; p -= lr * (g + m * buf)). The reference numbers come from this script,
// run with torch 2.x in float64:
//
//   x = [[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0]]; y = [1, 0, 2]
//   w1, b1, w2, b2 = (the values below)
//   opt = torch.optim.SGD([w1, b1, w2, b2], lr=0.1, momentum=0.9, nesterov=True)
//   for _ in range(2):
//     opt.zero_grad()
//     loss = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y); loss.backward(); opt.step()
//
// It also checks the DESIGN.md model_fn reads as written (names resolve unqualified).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "nn/nn.h"

using doctest::Approx;

namespace {

est::nn::Initializer values(std::vector<double> v) {
  return [v](const est::Shape& shape, est::DType, est::ops::Generator&) {
    return est::Tensor::from_vector<double>(v, shape);
  };
}

est::Tensor mlp(est::ModelContext& ctx, const est::Tensor& x) {
  using namespace est::nn;
  Tensor h = dense(ctx, x,
                   {.units = 3,
                    .activation = relu,
                    .kernel_initializer = values({0.2, -0.4, 0.6, 0.1, 0.3, -0.5}),
                    .bias_initializer = values({0.05, -0.05, 0.1})});
  return dense(ctx, h,
               {.units = 3,
                .kernel_initializer = values({0.3, -0.2, 0.1, -0.6, 0.4, 0.2, 0.5, 0.1, -0.3}),
                .bias_initializer = values({0.0, 0.1, -0.1})});
}

// DESIGN.md's model_fn body, on 8x8 images and without the Estimator's types.
est::nn::TrainOp design_model_fn(const std::map<std::string, est::Tensor>& features,
                                 const est::Tensor& labels, est::ModelContext& ctx) {
  using namespace est::nn;
  est::Tensor x =
      conv2d(ctx, features.at("image"), {.filters = 32, .kernel = 3, .activation = relu});
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 64, .activation = relu});
  est::Tensor logits = dense(ctx, x, {.units = 10});
  est::Tensor predictions = argmax(logits, 1);
  CHECK(predictions.shape() == est::Shape{labels.dim(0)});
  est::Tensor loss = sparse_softmax_cross_entropy(labels, logits);
  return est::optim::sgd(1e-4).minimize(loss, ctx);
}

}  // namespace

TEST_CASE("two Nesterov-momentum steps of an MLP match PyTorch") {
  est::nn::VariableStore store;
  est::ModelContext ctx(store);
  est::Tensor x = est::Tensor::from_vector<double>({0.5, -1.0, 1.5, 0.25, -0.75, 2.0}, {3, 2});
  est::Tensor y = est::Tensor::from_vector<int64_t>({1, 0, 2});
  std::vector<double> losses;
  for (int step = 0; step < 2; ++step) {
    ctx.begin_call();
    est::Tensor loss = est::nn::sparse_softmax_cross_entropy(y, mlp(ctx, x));
    losses.push_back(loss.item());
    est::optim::momentum(0.1, 0.9, /*use_nesterov=*/true).minimize(loss, ctx).run();
  }
  CHECK(losses[0] == Approx(0.9608578773215454).epsilon(1e-12));
  CHECK(losses[1] == Approx(0.9310213044013662).epsilon(1e-12));
  std::vector<double> w1{0.21186553841336467, -0.40864490184618296, 0.6581874275697325,
                         0.18365004007361946, 0.3230530715898212,   -0.47431524306555994};
  std::vector<double> b2{-0.020645760013036522, 0.0810126165776731, -0.060366856564636556};
  std::vector<double> got_w1 = store.get("dense/kernel").value.to_vector<double>();
  std::vector<double> got_b2 = store.get("dense_1/bias").value.to_vector<double>();
  for (size_t i = 0; i < w1.size(); ++i) CHECK(got_w1[i] == Approx(w1[i]).epsilon(1e-12));
  for (size_t i = 0; i < b2.size(); ++i) CHECK(got_b2[i] == Approx(b2[i]).epsilon(1e-12));
}

TEST_CASE("the DESIGN.md model_fn compiles and trains as written") {
  est::nn::VariableStore store;
  est::ModelContext ctx(store, est::nn::Mode::kTrain, 1);
  est::ops::Generator generator(2);
  std::map<std::string, est::Tensor> features{
      {"image", est::ops::random_uniform({4, 8, 8, 1}, 0.0, 1.0, generator)}};
  est::Tensor labels = est::Tensor::from_vector<int32_t>({0, 3, 9, 3});
  est::nn::TrainOp train_op = design_model_fn(features, labels, ctx);
  CHECK(train_op.variable_names() == std::vector<std::string>{"conv2d/kernel", "conv2d/bias",
                                                              "dense/kernel", "dense/bias",
                                                              "dense_1/kernel", "dense_1/bias"});
  CHECK(store.get("conv2d/kernel").value.shape() == est::Shape{3, 3, 1, 32});
  CHECK(store.get("dense/kernel").value.shape() == est::Shape{3 * 3 * 32, 64});
  est::Tensor before = store.get("dense_1/bias").value.clone();
  train_op.run();
  CHECK(ctx.global_step() == 1);
  CHECK(store.get("dense_1/bias").value.to_vector<float>() != before.to_vector<float>());
}
