// nn::conv2d then nn::max_pooling2d with the fusion of ops/conv_pool.h on and off: the tutorial
// CNN (examples/cnn_model.h's model) trained a few SGD steps and evaluated gives the same variables
// and logits either way (to float rounding), leaves no deferred convolution output behind, and a
// conv2d whose output feeds another conv2d (so it is computed when read) trains the same too.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "ops/conv_pool.h"
#include "ops/deferred_fill.h"
#include "ops/registry.h"

using namespace est;
using namespace est::nn;

namespace {

using Model = std::function<Tensor(ModelContext&, const Tensor&)>;

// examples/cnn_model.h's tutorial CNN (its header is for programs built on est's public include
// directory).
Tensor tutorial_cnn(ModelContext& ctx, const Tensor& images) {
  Tensor x = conv2d(ctx, images, {.filters = 32, .kernel = 3, .activation = relu});
  x = max_pooling2d(x, 2);
  x = dense(ctx, flatten(x), {.units = 64, .activation = relu});
  return dense(ctx, x, {.units = 10});
}

struct Trained {
  std::map<std::string, std::vector<float>> variables;
  std::vector<float> logits;          // evaluation after training
  int64_t conv_and_pool_kernels = 0;  // kConv2D and kPool2D kernels run, any CPU backend
};

int64_t conv_and_pool_kernels() {
  int64_t total = 0;
  for (ops::OpId id : {ops::OpId::kConv2D, ops::OpId::kPool2D})
    for (ops::Backend backend : {ops::Backend::kReference, ops::Backend::kOneDnn})
      total += ops::kernel_dispatch_count(id, {ops::DeviceType::kCPU, backend});
  return total;
}

Trained train(const Model& model, bool fusion, int64_t batch, int64_t channels = 1) {
  ops::set_conv_pool_fusion(fusion);
  VariableStore store;
  ModelContext ctx{store, Mode::kTrain, 7};
  ops::Generator generator(3);
  Tensor images = ops::random_uniform({batch, 28, 28, channels}, 0, 1, generator);
  Tensor labels = ops::cast(ops::random_uniform({batch}, 0, 10, generator), DType::kI64);
  const int64_t pending = ops::pending_deferred_fills();
  const int64_t kernels = conv_and_pool_kernels();
  for (int step = 0; step < 3; ++step) {
    ctx.begin_call();
    Tensor loss = sparse_softmax_cross_entropy(labels, model(ctx, images));
    optim::sgd(0.05).minimize(loss, ctx).run();
  }
  Trained trained;
  {
    ctx.begin_call();
    ctx.set_mode(Mode::kEval);
    ops::NoGradGuard no_grad;
    trained.logits = model(ctx, images).to_vector<float>();
  }
  CHECK(ops::pending_deferred_fills() == pending);
  trained.conv_and_pool_kernels = conv_and_pool_kernels() - kernels;
  for (const std::string& name : store.names())
    trained.variables[name] = store.get(name).value.to_vector<float>();
  ops::set_conv_pool_fusion(true);
  return trained;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, double tolerance) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(a[i] - b[i]) <= tolerance * (1.0 + std::abs(b[i])));
  }
}

// Returns the conv2d and max_pool2d kernels each way ran.
std::pair<int64_t, int64_t> check_same_training(const Model& model, int64_t batch,
                                                int64_t channels = 1) {
  const Trained fused = train(model, true, batch, channels);
  const Trained apart = train(model, false, batch, channels);
  REQUIRE(fused.variables.size() == apart.variables.size());
  for (const auto& [name, values] : apart.variables) {
    INFO("variable " << name);
    REQUIRE(fused.variables.count(name));
    check_close(fused.variables.at(name), values, 1e-4);
  }
  check_close(fused.logits, apart.logits, 1e-4);
  return {fused.conv_and_pool_kernels, apart.conv_and_pool_kernels};
}

}  // namespace

TEST_CASE("the tutorial CNN trains and evaluates the same with conv2d and max pooling fused") {
  for (int64_t batch : {13, 64}) {
    INFO("batch " << batch);
    const auto [fused, apart] = check_same_training(tutorial_cnn, batch);
    CHECK(fused == 0);  // neither the convolution's output nor a separate pooling was computed
    CHECK(apart == 8);  // 4 forward passes, each a conv2d and a max_pool2d
  }
}

TEST_CASE("a fused-eligible conv2d read by another layer is computed when read") {
  const auto [fused, apart] = check_same_training(
      [](ModelContext& ctx, const Tensor& images) {
        Tensor x = conv2d(ctx, images, {.filters = 16, .kernel = 3, .activation = relu});
        Tensor z = max_pooling2d(x, {3, 3});  // by the fused kernel: x is not computed yet
        Tensor y = conv2d(ctx, x, {.filters = 16, .kernel = 3, .activation = relu});  // now it is
        y = max_pooling2d(y, 2);
        Tensor features = ops::concat({flatten(y), flatten(z)}, 1);
        return dense(ctx, features, {.units = 10});
      },
      6, 3);
  CHECK(fused == 4 * 3);  // per pass: the first conv2d when read, the second, its pooling
  CHECK(apart == 4 * 4);
}
