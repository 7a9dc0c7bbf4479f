// Each optimizer for two steps against values worked out by hand from TF1's update rules,
// slot names, fresh configs finding their state, schedules, clipping and the TrainOp.
//
// Every case moves w = [1, -2] with the gradients g1 = [0.5, -1] then g2 = [0.25, 2].
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/nn.h"

using namespace est;
using namespace est::nn;
using doctest::Approx;

namespace {

const std::vector<double> kGrad1{0.5, -1.0};
const std::vector<double> kGrad2{0.25, 2.0};

struct Fixture {
  VariableStore store;
  Tensor w = store.create("w", Tensor::from_vector<double>({1.0, -2.0}), true);

  // Applies one step with a config built afresh, as model_fn does every step.
  template <class MakeOptimizer>
  void step(MakeOptimizer make, const std::vector<double>& gradient) {
    make().apply_gradients(store, {Tensor::from_vector<double>(gradient)}, {w});
  }
  double value(int i) const { return w.at({i}); }
  std::vector<double> slot(const std::string& name) const {
    Variable v = store.get(name);
    CHECK_FALSE(v.trainable);
    return v.value.to_vector<double>();
  }
};

}  // namespace

TEST_CASE("sgd: var -= lr * g") {
  Fixture f;
  auto make = [] { return optim::sgd(0.1); };
  f.step(make, kGrad1);
  CHECK(f.value(0) == Approx(0.95));
  CHECK(f.value(1) == Approx(-1.9));
  f.step(make, kGrad2);
  CHECK(f.value(0) == Approx(0.925));
  CHECK(f.value(1) == Approx(-2.1));
  CHECK(read_global_step(f.store) == 2);
  CHECK(f.store.names() == std::vector<std::string>{"w", "global_step"});  // no slots
}

TEST_CASE("momentum: accum = m * accum + g; var -= lr * accum") {
  Fixture f;
  auto make = [] { return optim::momentum(0.1, 0.9); };
  f.step(make, kGrad1);
  CHECK(f.slot("w/Momentum") == std::vector<double>{0.5, -1.0});
  CHECK(f.value(0) == Approx(0.95));
  CHECK(f.value(1) == Approx(-1.9));
  f.step(make, kGrad2);
  // accum = 0.9 * [0.5, -1] + [0.25, 2] = [0.7, 1.1]
  CHECK(f.slot("w/Momentum")[0] == Approx(0.7));
  CHECK(f.slot("w/Momentum")[1] == Approx(1.1));
  CHECK(f.value(0) == Approx(0.88));
  CHECK(f.value(1) == Approx(-2.01));
}

TEST_CASE("momentum with Nesterov: var -= lr * g + lr * m * accum") {
  Fixture f;
  auto make = [] { return optim::momentum(0.1, 0.9, /*use_nesterov=*/true); };
  f.step(make, kGrad1);
  CHECK(f.value(0) == Approx(1 - 0.05 - 0.045));
  CHECK(f.value(1) == Approx(-2 + 0.1 + 0.09));
  f.step(make, kGrad2);
  CHECK(f.value(0) == Approx(0.905 - 0.025 - 0.09 * 0.7));
  CHECK(f.value(1) == Approx(-1.81 - 0.2 - 0.09 * 1.1));
}

TEST_CASE("adagrad: accum starts at 0.1; accum += g^2; var -= lr * g / sqrt(accum)") {
  Fixture f;
  auto make = [] { return optim::adagrad(0.1); };
  f.step(make, kGrad1);
  CHECK(f.slot("w/Adagrad")[0] == Approx(0.35));
  CHECK(f.slot("w/Adagrad")[1] == Approx(1.1));
  double w0 = 1 - 0.1 * 0.5 / std::sqrt(0.35);
  double w1 = -2 + 0.1 * 1.0 / std::sqrt(1.1);
  CHECK(f.value(0) == Approx(w0));
  CHECK(f.value(1) == Approx(w1));
  f.step(make, kGrad2);
  CHECK(f.slot("w/Adagrad")[0] == Approx(0.4125));
  CHECK(f.slot("w/Adagrad")[1] == Approx(5.1));
  CHECK(f.value(0) == Approx(w0 - 0.1 * 0.25 / std::sqrt(0.4125)));
  CHECK(f.value(1) == Approx(w1 - 0.1 * 2.0 / std::sqrt(5.1)));
}

TEST_CASE("adam: TF1's bias correction in the step size, epsilon outside the root") {
  Fixture f;
  auto make = [] { return optim::adam(0.1); };  // beta1 0.9, beta2 0.999, epsilon 1e-8
  f.step(make, kGrad1);
  // m = 0.1 g1 = [0.05, -0.1]; v = 0.001 g1^2 = [0.00025, 0.001];
  // lr_t = 0.1 * sqrt(1 - 0.999) / (1 - 0.9)
  double lr1 = 0.1 * std::sqrt(0.001) / 0.1;
  double w0 = 1 - lr1 * 0.05 / (std::sqrt(0.00025) + 1e-8);
  double w1 = -2 - lr1 * -0.1 / (std::sqrt(0.001) + 1e-8);
  CHECK(w0 == Approx(0.9));  // Adam's first step is lr * sign(g)
  CHECK(f.value(0) == Approx(w0).epsilon(1e-10));
  CHECK(f.value(1) == Approx(w1).epsilon(1e-10));
  CHECK(f.slot("w/Adam")[0] == Approx(0.05));
  CHECK(f.slot("w/Adam_1")[1] == Approx(0.001));
  // beta1_power starts at beta1 (it is beta1^t during step t) and is multiplied after it.
  CHECK(f.slot("beta1_power")[0] == Approx(0.81));
  CHECK(f.slot("beta2_power")[0] == Approx(0.998001));

  f.step(make, kGrad2);
  // m = [0.07, 0.11]; v = 0.999 v + 0.001 g2^2 = [0.00031225, 0.004999];
  // lr_t = 0.1 * sqrt(1 - 0.999^2) / (1 - 0.9^2)
  double lr2 = 0.1 * std::sqrt(1 - 0.998001) / (1 - 0.81);
  CHECK(f.slot("w/Adam")[0] == Approx(0.07));
  CHECK(f.slot("w/Adam")[1] == Approx(0.11));
  CHECK(f.slot("w/Adam_1")[0] == Approx(0.00031225));
  CHECK(f.slot("w/Adam_1")[1] == Approx(0.004999));
  CHECK(f.value(0) == Approx(w0 - lr2 * 0.07 / (std::sqrt(0.00031225) + 1e-8)).epsilon(1e-10));
  CHECK(f.value(1) == Approx(w1 - lr2 * 0.11 / (std::sqrt(0.004999) + 1e-8)).epsilon(1e-10));
  CHECK(f.slot("beta1_power")[0] == Approx(0.729));
  CHECK(f.slot("beta2_power")[0] == Approx(0.997003));
}

TEST_CASE("rmsprop: mean square starts at 1, epsilon inside the root") {
  Fixture f;
  auto make = [] { return optim::rmsprop(0.1); };  // decay 0.9, momentum 0, epsilon 1e-10
  f.step(make, kGrad1);
  // ms = 0.9 + 0.1 g1^2 = [0.925, 1.0]
  CHECK(f.slot("w/RMSProp")[0] == Approx(0.925));
  CHECK(f.slot("w/RMSProp")[1] == Approx(1.0));
  double w0 = 1 - 0.1 * 0.5 / std::sqrt(0.925 + 1e-10);
  double w1 = -2 + 0.1 * 1.0 / std::sqrt(1.0 + 1e-10);
  CHECK(f.value(0) == Approx(w0));
  CHECK(f.value(1) == Approx(w1));
  f.step(make, kGrad2);
  // ms = 0.9 ms + 0.1 g2^2 = [0.83875, 1.3]
  CHECK(f.slot("w/RMSProp")[0] == Approx(0.83875));
  CHECK(f.slot("w/RMSProp")[1] == Approx(1.3));
  CHECK(f.value(0) == Approx(w0 - 0.1 * 0.25 / std::sqrt(0.83875)));
  CHECK(f.value(1) == Approx(w1 - 0.1 * 2.0 / std::sqrt(1.3)));
  CHECK(f.slot("w/RMSProp_1")[1] == Approx(0.1 * 2.0 / std::sqrt(1.3)));  // momentum slot
}

TEST_CASE("rmsprop from a zero mean square is Keras 2.11+'s RMSprop") {
  // keras/optimizers/rmsprop.py: velocity = rho v + (1 - rho) g^2 from zeros;
  // var -= lr g / sqrt(v + epsilon).
  Fixture f;
  auto make = [] { return optim::rmsprop(0.1, 0.9, 0.0, 1e-7, false, 0.0); };
  f.step(make, kGrad1);
  CHECK(f.slot("w/RMSProp")[0] == Approx(0.025));
  CHECK(f.slot("w/RMSProp")[1] == Approx(0.1));
  double w0 = 1 - 0.1 * 0.5 / std::sqrt(0.025 + 1e-7);
  double w1 = -2 + 0.1 * 1.0 / std::sqrt(0.1 + 1e-7);
  CHECK(f.value(0) == Approx(w0));
  CHECK(f.value(1) == Approx(w1));
  f.step(make, kGrad2);
  CHECK(f.value(0) == Approx(w0 - 0.1 * 0.25 / std::sqrt(0.9 * 0.025 + 0.1 * 0.0625 + 1e-7)));
  CHECK(f.value(1) == Approx(w1 - 0.1 * 2.0 / std::sqrt(0.9 * 0.1 + 0.1 * 4.0 + 1e-7)));
}

TEST_CASE("rmsprop with momentum accumulates the scaled steps") {
  Fixture f;
  auto make = [] { return optim::rmsprop(0.1, 0.9, 0.5); };
  f.step(make, kGrad1);
  double mom0 = 0.1 * 0.5 / std::sqrt(0.925);
  CHECK(f.value(0) == Approx(1 - mom0));
  f.step(make, kGrad2);
  double mom1 = 0.5 * mom0 + 0.1 * 0.25 / std::sqrt(0.83875);
  CHECK(f.slot("w/RMSProp_1")[0] == Approx(mom1));
  CHECK(f.value(0) == Approx(1 - mom0 - mom1));
}

TEST_CASE("centered rmsprop subtracts the squared mean gradient") {
  Fixture f;
  auto make = [] { return optim::rmsprop(0.1, 0.9, 0.0, 1e-10, /*centered=*/true); };
  f.step(make, kGrad1);
  // mg = 0.1 g1 = [0.05, -0.1]; denominator = ms - mg^2
  CHECK(f.slot("w/RMSProp_1")[0] == Approx(0.05));
  CHECK(f.value(0) == Approx(1 - 0.1 * 0.5 / std::sqrt(0.925 - 0.0025)));
  CHECK(f.store.contains("w/RMSProp_2"));
}

TEST_CASE("optimizer arguments are validated") {
  CHECK_THROWS_AS(optim::sgd(-1.0), InvalidArgumentError);
  CHECK_THROWS_AS(optim::momentum(0.1, -0.5), InvalidArgumentError);
  CHECK_THROWS_AS(optim::adagrad(0.1, 0.0), InvalidArgumentError);
  CHECK_THROWS_AS(optim::adam(0.1, 1.0), InvalidArgumentError);
  CHECK_THROWS_AS(optim::rmsprop(0.1, 1.5), InvalidArgumentError);
  CHECK_THROWS_AS(optim::sgd(0.1).clip_by_global_norm(0.0), InvalidArgumentError);
  Fixture f;
  auto sgd = optim::sgd(0.1);
  CHECK_THROWS_AS(sgd.apply_gradients(f.store, {Tensor::zeros({3}, DType::kF64)}, {f.w}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(sgd.apply_gradients(f.store, {Tensor::zeros({2}, DType::kF32)}, {f.w}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(sgd.apply_gradients(f.store, {}, {f.w}), InvalidArgumentError);
  CHECK_THROWS_AS(sgd.apply_gradients(f.store, {Tensor::zeros({2}, DType::kF64)},
                                      {Tensor::zeros({2}, DType::kF64)}),
                  NotFoundError);
  CHECK_THROWS_AS(sgd.apply_gradients(f.store, {Tensor()}, {f.w}), InvalidArgumentError);
}

TEST_CASE("an undefined gradient skips its variable") {
  VariableStore store;
  Tensor a = store.create("a", Tensor::ones({1}, DType::kF64), true);
  Tensor b = store.create("b", Tensor::ones({1}, DType::kF64), true);
  optim::sgd(1.0).apply_gradients(store, {Tensor(), Tensor::ones({1}, DType::kF64)}, {a, b});
  CHECK(a.item() == 1.0);
  CHECK(b.item() == 0.0);
}

TEST_CASE("float32 variables are updated in place") {
  VariableStore store;
  Tensor w = store.create("w", Tensor::from_vector<float>({1, 2}), true);
  Tensor alias = w;
  optim::adam(0.01).apply_gradients(store, {Tensor::from_vector<float>({1, -1})}, {w});
  CHECK(w.shares_storage(alias));
  CHECK(w.dtype() == DType::kF32);
  CHECK(w.at({0}) == Approx(0.99).epsilon(1e-5));
  CHECK(w.at({1}) == Approx(2.01).epsilon(1e-5));
  CHECK(store.get("w/Adam").value.dtype() == DType::kF32);
}

TEST_CASE("exponential_decay, continuous and staircase") {
  auto smooth = optim::exponential_decay(0.1, 10, 0.5);
  CHECK(smooth.at(0) == Approx(0.1));
  CHECK(smooth.at(5) == Approx(0.1 * std::sqrt(0.5)));
  CHECK(smooth.at(20) == Approx(0.025));
  auto stairs = optim::exponential_decay(0.1, 10, 0.5, /*staircase=*/true);
  CHECK(stairs.at(9) == Approx(0.1));
  CHECK(stairs.at(10) == Approx(0.05));
  CHECK(stairs.at(25) == Approx(0.025));
  CHECK_THROWS_AS(optim::exponential_decay(0.1, 0, 0.5), InvalidArgumentError);
}

TEST_CASE("piecewise_constant switches after each boundary") {
  auto lr = optim::piecewise_constant({10, 20}, {1.0, 0.5, 0.1});
  CHECK(lr.at(0) == 1.0);
  CHECK(lr.at(10) == 1.0);
  CHECK(lr.at(11) == 0.5);
  CHECK(lr.at(20) == 0.5);
  CHECK(lr.at(21) == 0.1);
  CHECK(lr.at(1000) == 0.1);
  CHECK_THROWS_AS(optim::piecewise_constant({10}, {1.0}), InvalidArgumentError);
  CHECK_THROWS_AS(optim::piecewise_constant({20, 10}, {1.0, 0.5, 0.1}), InvalidArgumentError);
}

TEST_CASE("a schedule is read at the global step before the increment") {
  Fixture f;
  auto make = [] { return optim::sgd(optim::piecewise_constant({0}, {1.0, 0.1})); };
  f.step(make, kGrad1);  // step 0: lr 1
  CHECK(f.value(0) == Approx(0.5));
  f.step(make, kGrad1);  // step 1: lr 0.1
  CHECK(f.value(0) == Approx(0.45));
  // A lambda is a schedule too.
  auto custom = [] { return optim::sgd([](int64_t step) { return step == 2 ? 2.0 : 0.0; }); };
  f.step(custom, kGrad1);
  CHECK(f.value(0) == Approx(-0.55));
  auto bad = [] { return optim::sgd([](int64_t) { return -1.0; }); };
  CHECK_THROWS_AS(f.step(bad, kGrad1), InvalidArgumentError);
}

TEST_CASE("clip_by_global_norm scales every tensor by clip / max(norm, clip)") {
  std::vector<Tensor> tensors{Tensor::from_vector<double>({3, 4}), Tensor(),
                              Tensor::from_vector<double>({12})};
  CHECK(optim::global_norm(tensors) == Approx(13.0));
  auto clipped = optim::clip_by_global_norm(tensors, 6.5);
  CHECK(clipped.global_norm == Approx(13.0));
  CHECK(clipped.tensors[0].at({0}) == Approx(1.5));
  CHECK(clipped.tensors[0].at({1}) == Approx(2.0));
  CHECK_FALSE(clipped.tensors[1].defined());
  CHECK(clipped.tensors[2].at({0}) == Approx(6.0));
  auto untouched = optim::clip_by_global_norm(tensors, 20.0);
  CHECK(untouched.tensors[2].at({0}) == 12.0);
  auto nan = optim::clip_by_global_norm({Tensor::from_vector<double>({INFINITY, 1})}, 1.0);
  CHECK(std::isnan(nan.tensors[0].at({1})));
}

TEST_CASE("an optimizer with clipping clips before its update") {
  VariableStore store;
  Tensor w = store.create("w", Tensor::zeros({2}, DType::kF64), true);
  optim::sgd(1.0).clip_by_global_norm(1.0).apply_gradients(
      store, {Tensor::from_vector<double>({3, 4})}, {w});
  CHECK(w.at({0}) == Approx(-0.6));
  CHECK(w.at({1}) == Approx(-0.8));
}

TEST_CASE("minimize returns a deferred TrainOp; run differentiates, transforms and updates") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("w", {2}, DType::kF64, constant(1.0));
  Tensor frozen = ctx.get_variable("frozen", {2}, DType::kF64, constant(1.0), false);
  Tensor x = Tensor::from_vector<double>({2, 3});
  Tensor loss = ops::sum(ops::mul(ops::mul(w, x), frozen));  // d loss / d w = x
  TrainOp train_op = optim::sgd(0.5).minimize(loss, ctx);
  CHECK(train_op.defined());
  CHECK(train_op.variable_names() == std::vector<std::string>{"w"});
  CHECK(w.to_vector<double>() == std::vector<double>{1, 1});  // nothing ran yet

  auto grads = train_op.compute_gradients();
  REQUIRE(grads.size() == 1);
  CHECK(grads[0].name == "w");
  CHECK(grads[0].gradient.to_vector<double>() == std::vector<double>{2, 3});

  std::vector<std::string> seen;
  train_op.set_gradient_transform([&](std::vector<GradAndVar>& g) {
    for (GradAndVar& entry : g) {
      seen.push_back(entry.name);
      entry.gradient = ops::mul(entry.gradient, 2.0);  // stands in for an all-reduce
    }
  });
  train_op.run();
  CHECK(seen == std::vector<std::string>{"w"});
  CHECK(w.at({0}) == Approx(1 - 0.5 * 4));
  CHECK(w.at({1}) == Approx(1 - 0.5 * 6));
  CHECK(frozen.to_vector<double>() == std::vector<double>{1, 1});
  CHECK(ctx.global_step() == 1);
  train_op.run([](std::vector<GradAndVar>&) {});  // an explicit transform replaces the set one
  CHECK(w.at({0}) == Approx(-1 - 0.5 * 2));
  CHECK(ctx.global_step() == 2);
}

TEST_CASE("a TrainOp carries the reduction of the loss minimize was given") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("w", {2}, DType::kF64, constant(1.0));
  Tensor target = Tensor::from_vector<double>({0, 1});
  CHECK(optim::sgd(0.1).minimize(ops::sum(w), ctx).loss_reduction() ==
        Reduction::kSumByNonzeroWeights);  // no loss function: TF's None, a mean
  Tensor loss = mean_squared_error(target, w, 1.0, Reduction::kSum);
  TrainOp train_op = optim::sgd(0.1).minimize(loss, ctx);
  Tensor mean = mean_squared_error(target, w, 1.0, Reduction::kMean);  // after minimize
  CHECK(train_op.loss_reduction() == Reduction::kSum);
  // The loss carries its reduction: a loss computed since (not part of this one) changes
  // nothing, as in TF when that loss is computed after minimize.
  CHECK(optim::sgd(0.1).minimize(loss, ctx).loss_reduction() == Reduction::kSum);
  CHECK(optim::sgd(0.1).minimize(mean, ctx).loss_reduction() == Reduction::kMean);
  Tensor none = mean_squared_error(target, w, 1.0, Reduction::kNone);
  CHECK(optim::sgd(0.1).minimize(ops::mul(ops::sum(none), 0.5), ctx).loss_reduction() ==
        Reduction::kNone);
}

TEST_CASE("minimize's loss_reduction option overrides the reduction recorded on the loss") {
  // TF2's explicit style (the canned heads and Keras pass theirs): the option wins over the
  // record; unset, the record is the TF1 fallback.
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("w", {2}, DType::kF64, constant(1.0));
  Tensor target = Tensor::from_vector<double>({0, 1});
  Tensor mean = mean_squared_error(target, w, 1.0, Reduction::kMean);
  CHECK(optim::sgd(0.1).minimize(mean, ctx, {.loss_reduction = Reduction::kSum}).loss_reduction() ==
        Reduction::kSum);
  CHECK(optim::sgd(0.1)
            .minimize(ops::sum(w), ctx, {.loss_reduction = Reduction::kSum})
            .loss_reduction() == Reduction::kSum);  // no loss function took part
  CHECK(optim::sgd(0.1).minimize(mean, ctx, {}).loss_reduction() == Reduction::kMean);
}

TEST_CASE("the recorded reduction leaves the loss's gradient as it was") {
  // nn records a loss function's reduction by wrapping its result's gradient function: the
  // gradient through it must be the unwrapped one, bit for bit.
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("w", {3}, DType::kF64, constant(0.5));
  Tensor target = Tensor::from_vector<double>({0, 1, 3});
  Tensor recorded = mean_squared_error(target, w, 1.0, Reduction::kSum);
  Tensor plain = ops::sum(ops::squared_difference(w, target));
  CHECK(recorded.item() == plain.item());
  CHECK(ops::gradients(recorded, {w})[0].to_vector<double>() ==
        ops::gradients(plain, {w})[0].to_vector<double>());
  // A later record takes the latest reduction, and the gradient stays the same.
  Tensor again = compute_weighted_loss(recorded, 1.0, Reduction::kNone);
  CHECK(loss_reduction(again) == Reduction::kNone);
  CHECK(ops::gradients(again, {w})[0].to_vector<double>() ==
        ops::gradients(plain, {w})[0].to_vector<double>());
}

TEST_CASE("minimize and an empty TrainOp report misuse") {
  VariableStore store;
  ModelContext ctx(store);
  CHECK_THROWS_AS(TrainOp().run(), FailedPreconditionError);
  CHECK_THROWS_AS(optim::sgd(0.1).minimize(Tensor::ones({}), ctx), InvalidArgumentError);
  Tensor w = ctx.get_variable("w", {2}, DType::kF64, constant(1.0));
  CHECK_THROWS_AS(optim::sgd(0.1).minimize(ops::mul(w, 2.0), ctx), InvalidArgumentError);
  CHECK_THROWS_AS(optim::sgd(0.1).minimize(Tensor(), ctx), InvalidArgumentError);
  Tensor detached;
  {
    ops::NoGradGuard no_grad;
    detached = ops::sum(w);
  }
  CHECK_THROWS_AS(optim::sgd(0.1).minimize(detached, ctx), InvalidArgumentError);
}

TEST_CASE("apply_gradients through the context, as a custom training loop calls it") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("layer/w", {1}, DType::kF64, constant(2.0));
  Tensor loss = ops::sum(ops::square(w));  // gradient 2w = 4
  auto grads = ops::gradients(loss, {w});
  optim::momentum(0.25, 0.9).apply_gradients(ctx, grads, {w});
  CHECK(w.item() == Approx(1.0));
  CHECK(store.contains("layer/w/Momentum"));
}

TEST_CASE("update moves the variables at the step it is given and leaves global_step alone") {
  // The pure update a strategy's gradient path and a ps task call: the learning rate at the
  // step they pass, clipping included, and no step count of its own (the caller advances it).
  VariableStore store;
  Tensor w = store.create("w", Tensor::zeros({2}, DType::kF64), true);
  optim::Optimizer sgd =
      optim::sgd(optim::piecewise_constant({4}, {1.0, 0.1})).clip_by_global_norm(1.0);
  sgd.update(store, {{"w", Tensor::from_vector<double>({3, 4}), w}}, 5);  // lr 0.1, clipped
  CHECK(w.at({0}) == Approx(-0.06));
  CHECK(w.at({1}) == Approx(-0.08));
  CHECK_FALSE(store.contains(std::string(kGlobalStepName)));
  sgd.update(store, {{"w", Tensor::from_vector<double>({0.3, 0.4}), w}}, 0);  // lr 1, not clipped
  CHECK(w.at({0}) == Approx(-0.36));
  CHECK_FALSE(store.contains(std::string(kGlobalStepName)));
  // apply_gradients is update() at the store's step, then the step's increment.
  sgd.apply_gradients(store, {Tensor::from_vector<double>({0.3, 0.4})}, {w});
  CHECK(w.at({0}) == Approx(-0.66));
  CHECK(read_global_step(store) == 1);
}

TEST_CASE("clipping gradient entries: a row-sparse one by its rows' values") {
  VariableStore store;
  Tensor table = store.create("table", Tensor::zeros({3, 2}, DType::kF64), true);
  Tensor bias = store.create("bias", Tensor::zeros({1}, DType::kF64), true);
  GradAndVar rows{"table", Tensor(), table};
  rows.sparse_gradient = {Tensor::from_vector<int64_t>({1}),
                          Tensor::from_vector<double>({3, 4}).reshape({1, 2}), Shape{3, 2}};
  std::vector<GradAndVar> grads{rows, {"bias", Tensor::from_vector<double>({12}), bias}};
  optim::clip_by_global_norm(grads, 6.5);  // global norm 13
  CHECK(grads[0].sparse_gradient.values.at({0, 0}) == Approx(1.5));
  CHECK(grads[0].sparse_gradient.values.at({0, 1}) == Approx(2.0));
  CHECK_FALSE(grads[0].gradient.defined());
  CHECK(grads[1].gradient.at({0}) == Approx(6.0));
}
