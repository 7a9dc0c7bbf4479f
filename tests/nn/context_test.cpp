// VariableStore and ModelContext: naming and reuse across calls, scopes, explicit names,
// shape-mismatch errors, trainable flags, in-place assignment and staged restores, moving
// averages applied at once or deferred, and contexts that share one store.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/context_control.h"
#include "nn/nn.h"
#include "nn/restore_error.h"

using namespace est;
using namespace est::nn;

namespace {

// Two dense layers under no scope, then one under "block1": the names a TF1 program gets.
Tensor small_model(ModelContext& ctx, const Tensor& x) {
  Tensor h = dense(ctx, x, {.units = 4, .activation = relu});
  h = dense(ctx, h, {.units = 3});
  auto scope = ctx.variable_scope("block1");
  return dense(ctx, h, {.units = 2});
}

bool contains_all(const std::string& text, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (text.find(p) == std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("layers are numbered per call and find their variables again next call") {
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, 7);
  Tensor x = Tensor::ones({5, 6});
  ctx.begin_call();
  small_model(ctx, x);
  std::vector<std::string> expected{"dense/kernel", "dense/bias",          "dense_1/kernel",
                                    "dense_1/bias", "block1/dense/kernel", "block1/dense/bias"};
  CHECK(store.names() == expected);
  Tensor kernel = store.get("dense/kernel").value;
  CHECK(kernel.shape() == Shape{6, 4});
  CHECK(store.get("block1/dense/kernel").value.shape() == Shape{3, 2});

  ctx.begin_call();  // the next step: same code, same variables, nothing new
  small_model(ctx, x);
  CHECK(store.names() == expected);
  CHECK(store.get("dense/kernel").value.impl() == kernel.impl());

  // A fresh context on the same store (the Estimator may make one per call) also reuses them.
  ModelContext next(store, Mode::kEval, 7);
  small_model(next, x);
  CHECK(store.size() == expected.size());
}

TEST_CASE("scopes nest, pop with their guard, and re-entering one continues its numbering") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor x = Tensor::ones({2, 3});
  {
    auto outer = ctx.variable_scope("encoder");
    {
      auto inner = ctx.variable_scope("block1");
      CHECK(ctx.current_scope() == "encoder/block1");
      dense(ctx, x, {.units = 2});
    }
    CHECK(ctx.current_scope() == "encoder");
    dense(ctx, x, {.units = 2});
  }
  {
    auto again = ctx.variable_scope("encoder");
    dense(ctx, x, {.units = 2});  // encoder/dense exists in this call: this is encoder/dense_1
  }
  CHECK(ctx.current_scope().empty());
  CHECK(store.contains("encoder/block1/dense/kernel"));
  CHECK(store.contains("encoder/dense/kernel"));
  CHECK(store.contains("encoder/dense_1/kernel"));
  CHECK_THROWS_AS((void)ctx.variable_scope("a/b"), InvalidArgumentError);
  CHECK_THROWS_AS((void)ctx.variable_scope(""), InvalidArgumentError);
}

TEST_CASE("begin_call resets counters and scopes") {
  VariableStore store;
  ModelContext ctx(store);
  CHECK(ctx.layer_name("dense") == "dense");
  CHECK(ctx.layer_name("dense") == "dense_1");
  CHECK(ctx.layer_name("conv2d") == "conv2d");
  auto scope = ctx.variable_scope("s");
  ctx.begin_call();
  CHECK(ctx.current_scope().empty());
  CHECK(ctx.layer_name("dense") == "dense");
}

TEST_CASE("an explicit layer name is used as is, so two layers with one name share weights") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor x = Tensor::ones({2, 3});
  Tensor a = dense(ctx, x, {.units = 3, .name = "shared"});
  Tensor b = dense(ctx, a, {.units = 3, .name = "shared"});
  Tensor c = dense(ctx, x, {.units = 3});  // the automatic counter is independent
  CHECK(store.names() ==
        std::vector<std::string>{"shared/kernel", "shared/bias", "dense/kernel", "dense/bias"});
  CHECK_THROWS_AS(dense(ctx, x, {.units = 3, .name = "a/b"}), InvalidArgumentError);
}

TEST_CASE("a variable requested with another shape is an error naming it and both shapes") {
  VariableStore store;
  ModelContext ctx(store);
  dense(ctx, Tensor::ones({2, 3}), {.units = 4});
  ctx.begin_call();
  try {
    dense(ctx, Tensor::ones({2, 5}), {.units = 4});  // the input width changed
    FAIL("expected an InvalidArgumentError");
  } catch (const InvalidArgumentError& e) {
    CHECK(contains_all(e.what(), {"dense/kernel", "[3, 4]", "[5, 4]"}));
  }
  CHECK_THROWS_AS(ctx.get_variable("dense/kernel", {3, 4}, DType::kF64, zeros()),
                  InvalidArgumentError);
  CHECK_THROWS_AS(ctx.get_variable("dense/kernel", {3, 4}, DType::kF32, zeros(), false),
                  InvalidArgumentError);
}

TEST_CASE("get_variable creates once with its initializer and flags trainability") {
  VariableStore store;
  ModelContext ctx(store);
  Tensor w = ctx.get_variable("w", {2, 2}, DType::kF32, constant(3.0));
  Tensor s = ctx.get_variable("count", {}, DType::kI64, zeros(), false);
  CHECK(w.requires_grad());
  CHECK_FALSE(s.requires_grad());
  CHECK(w.to_vector<float>() == std::vector<float>{3, 3, 3, 3});
  // The initializer is not called again: a second request returns the same tensor.
  Tensor again = ctx.get_variable("w", {2, 2}, DType::kF32, constant(5.0));
  CHECK(again.impl() == w.impl());
  CHECK(again.to_vector<float>() == std::vector<float>{3, 3, 3, 3});
  auto trainable = store.trainable_variables();
  REQUIRE(trainable.size() == 1);
  CHECK(trainable[0].name == "w");
  CHECK_THROWS_AS(ctx.get_variable("i", {2}, DType::kI32, zeros(), true), InvalidArgumentError);
  CHECK_THROWS_AS(ctx.get_variable("missing", {2}, DType::kF32, nullptr), InvalidArgumentError);
  auto bad = [](const Shape&, DType dtype, ops::Generator&) { return Tensor::zeros({3}, dtype); };
  CHECK_THROWS_AS(ctx.get_variable("bad", {2}, DType::kF32, bad), InvalidArgumentError);
}

TEST_CASE("the context lists the trainable variables its call used") {
  VariableStore store;
  ModelContext ctx(store);
  ctx.get_variable("a", {1}, DType::kF32, zeros());
  ctx.get_variable("b", {1}, DType::kF32, zeros());
  ctx.get_variable("frozen", {1}, DType::kF32, zeros(), false);
  ctx.begin_call();
  ctx.get_variable("b", {1}, DType::kF32, zeros());
  auto used = ctx.trainable_variables();
  REQUIRE(used.size() == 1);
  CHECK(used[0].name == "b");
}

TEST_CASE("the store assigns in place, stages restores, and reports misuse") {
  VariableStore store;
  Tensor v = store.create("v", Tensor::zeros({2}), true);
  Tensor before = v;
  store.assign("v", Tensor::from_vector<float>({1, 2}));
  CHECK(v.shares_storage(before));
  CHECK(v.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(v.requires_grad());
  CHECK(store.name_of(v) == "v");
  CHECK_THROWS_AS(store.name_of(Tensor::zeros({2})), NotFoundError);
  CHECK_THROWS_AS(store.create("v", Tensor::zeros({2}), true), AlreadyExistsError);
  CHECK_THROWS_AS(store.get("nope"), NotFoundError);
  CHECK_THROWS_AS(store.assign("nope", Tensor::zeros({2})), NotFoundError);
  try {
    store.assign("v", Tensor::zeros({3}));
    FAIL("expected an InvalidArgumentError");
  } catch (const InvalidArgumentError& e) {
    CHECK(contains_all(e.what(), {"'v'", "[2]", "[3]"}));
  }

  // A restore before the variable exists is staged, then taken by the creation.
  store.restore("later", Tensor::from_vector<float>({4, 5, 6}));
  CHECK(store.pending_restores() == std::vector<std::string>{"later"});
  ModelContext ctx(store);
  Tensor later = ctx.get_variable("later", {3}, DType::kF32, zeros());
  CHECK(later.to_vector<float>() == std::vector<float>{4, 5, 6});
  CHECK(store.pending_restores().empty());
  store.restore("later", Tensor::from_vector<float>({7, 8, 9}));  // exists: assigned in place
  CHECK(later.to_vector<float>() == std::vector<float>{7, 8, 9});
  store.restore("wrong", Tensor::zeros({2}));
  CHECK_THROWS_AS(ctx.get_variable("wrong", {3}, DType::kF32, zeros()), InvalidArgumentError);
}

TEST_CASE("a restored value that does not fit its variable is a RestoreMismatchError") {
  // Typed, so that the Estimator names the checkpoint without reading the message.
  VariableStore store;
  ModelContext ctx(store);
  store.restore("wrong", Tensor::zeros({2}));
  CHECK_THROWS_AS(ctx.get_variable("wrong", {3}, DType::kF32, zeros()), RestoreMismatchError);
  // Assigning a value of another shape is an InvalidArgumentError, but not a restore's.
  Tensor v = ctx.get_variable("v", {2}, DType::kF32, zeros());
  try {
    store.assign("v", Tensor::zeros({3}));
    FAIL("expected an InvalidArgumentError");
  } catch (const RestoreMismatchError&) {
    FAIL("assign threw a RestoreMismatchError");
  } catch (const InvalidArgumentError&) {
  }
}

TEST_CASE("global_step is an int64 scalar, created at zero, not trainable") {
  VariableStore store;
  ModelContext ctx(store);
  CHECK(ctx.global_step() == 0);
  Variable step = store.get("global_step");
  CHECK(step.value.dtype() == DType::kI64);
  CHECK(step.value.shape() == Shape{});
  CHECK_FALSE(step.trainable);
  step.value.fill(41);
  CHECK(ctx.global_step() == 41);
}

TEST_CASE("the same seed draws the same initial weights") {
  auto first_kernel = [](uint64_t seed) {
    VariableStore store;
    ModelContext ctx(store, Mode::kTrain, seed);
    dense(ctx, Tensor::ones({1, 8}), {.units = 8});
    return store.get("dense/kernel").value.to_vector<float>();
  };
  CHECK(first_kernel(3) == first_kernel(3));
  CHECK(first_kernel(3) != first_kernel(4));
}

// A model_fn author's ModelContext: what only a strategy sets on it (device, deferred moving
// averages, shared store, the step's replica) is ContextControl's (nn/context_control.h).
template <class Context>
concept ExposesStrategySettings = requires(Context& ctx) {
  ctx.set_device(Device::cpu(0));
}
|| requires(Context& ctx) { ctx.set_defer_moving_averages(true); }
|| requires(Context& ctx) { ctx.defers_moving_averages(); }
|| requires(Context& ctx) { ctx.take_moving_average_updates(); }
|| requires(Context& ctx) { ctx.set_shares_store(true); }
|| requires(Context& ctx) { ctx.replica_sync(); }
|| requires(Context& ctx) { ctx.set_replica_sync(nullptr); };

TEST_CASE("ModelContext's public interface is the model_fn's; ContextControl sets the rest") {
  CHECK_FALSE(ExposesStrategySettings<ModelContext>);
  CHECK(ExposesStrategySettings<ContextControl>);
  VariableStore store;
  ModelContext ctx(store);
  ContextControl control(ctx);
  control.set_device(Device::cpu(1));
  CHECK(ctx.device() == Device::cpu(1));
  CHECK(control.replica_sync() == nullptr);
}

TEST_CASE("moving averages apply at once, or wait for a strategy when deferred") {
  VariableStore store;
  Tensor average = store.create("average", Tensor::from_vector<double>({1, 2}), false);
  Tensor value = Tensor::from_vector<double>({11, 22});

  ModelContext ctx(store);
  ContextControl control(ctx);
  CHECK_FALSE(control.defers_moving_averages());
  ctx.update_moving_average(average, value, 0.5);  // 1 * 0.5 + 11 * 0.5, 2 * 0.5 + 22 * 0.5
  CHECK(average.to_vector<double>() == std::vector<double>{6, 12});
  CHECK(control.take_moving_average_updates().empty());

  control.set_defer_moving_averages(true);
  CHECK(control.defers_moving_averages());
  ctx.update_moving_average(average, value, 0.5);
  CHECK(average.to_vector<double>() == std::vector<double>{6, 12});  // not yet
  std::vector<MovingAverageUpdate> updates = control.take_moving_average_updates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].momentum == 0.5);
  CHECK(updates[0].variable.shares_storage(average));
  CHECK(updates[0].value.to_vector<double>() == std::vector<double>{11, 22});
  CHECK(control.take_moving_average_updates().empty());  // taken once
  CHECK(average.to_vector<double>() == std::vector<double>{6, 12});
  apply_moving_average(updates[0]);  // 6 * 0.5 + 11 * 0.5, 12 * 0.5 + 22 * 0.5
  CHECK(average.to_vector<double>() == std::vector<double>{8.5, 17});

  // begin_call drops updates nobody took.
  ctx.update_moving_average(average, value, 0.5);
  ctx.begin_call();
  CHECK(control.take_moving_average_updates().empty());
  CHECK(average.to_vector<double>() == std::vector<double>{8.5, 17});
}

TEST_CASE("batch norm's moving statistics go through the context's deferral") {
  VariableStore store;
  ModelContext ctx(store);
  ContextControl control(ctx);
  control.set_defer_moving_averages(true);
  Tensor x = Tensor::from_vector<float>({1, 10, 3, 20}, {2, 2});  // means 2 and 15
  batch_normalization(ctx, x, {.momentum = 0.5});
  Tensor moving_mean = store.get("batch_normalization/moving_mean").value;
  CHECK(moving_mean.to_vector<float>() == std::vector<float>{0, 0});
  std::vector<MovingAverageUpdate> updates = control.take_moving_average_updates();
  REQUIRE(updates.size() == 2);  // mean and variance
  for (const auto& update : updates) apply_moving_average(update);
  CHECK(moving_mean.to_vector<float>() == std::vector<float>{1, 7.5});
  // [2, 2] takes TF's non-fused path: biased variances 1 and 25, from a moving variance of 1.
  CHECK(store.get("batch_normalization/moving_variance").value.to_vector<float>() ==
        std::vector<float>{1.0f, 13.0f});
}

TEST_CASE("contexts sharing a store keep their initializer streams in step") {
  // Two dense layers; `both` false builds only the first.
  auto build = [](ModelContext& ctx, bool both) {
    ctx.begin_call();
    Tensor h = dense(ctx, Tensor::ones({1, 3}), {.units = 4});
    if (both) dense(ctx, h, {.units = 2});
  };
  VariableStore own;
  ModelContext reference(own, Mode::kTrain, 7);
  build(reference, true);
  std::vector<float> expected = own.get("dense_1/kernel").value.to_vector<float>();

  // Context `first` creates the first layer; `second` finds it and creates the second layer.
  for (bool shares : {true, false}) {
    CAPTURE(shares);
    VariableStore shared;
    ModelContext first(shared, Mode::kTrain, 7), second(shared, Mode::kTrain, 7);
    ContextControl(first).set_shares_store(shares);
    ContextControl(second).set_shares_store(shares);
    build(first, false);
    build(second, true);
    CHECK(shared.get("dense/kernel").value.to_vector<float>() ==
          own.get("dense/kernel").value.to_vector<float>());
    // Without sharing, `second` skipped the first layer's draws and gives the second layer
    // the first layer's numbers.
    CHECK((shared.get("dense_1/kernel").value.to_vector<float>() == expected) == shares);
    // The next call finds every variable: no more draws, the same values.
    build(second, true);
    build(first, true);
    CHECK((shared.get("dense_1/kernel").value.to_vector<float>() == expected) == shares);
  }
}

TEST_CASE("a context derived from ModelContext is destroyed whole through a ModelContext pointer") {
  // The strategies own their replicas' contexts as unique_ptr<ModelContext>, and the Estimator's
  // are EstimatorContexts: without a virtual destructor the derived part would never be
  // destroyed (and ASan reports a new-delete-type-mismatch).
  CHECK(std::has_virtual_destructor_v<ModelContext>);
  struct Flag {
    bool* destroyed;
    ~Flag() { *destroyed = true; }
  };
  struct Derived : ModelContext {
    Derived(VariableStore& store, bool* destroyed) : ModelContext(store), flag{destroyed} {}
    Flag flag;
  };
  VariableStore store;
  bool destroyed = false;
  std::unique_ptr<ModelContext> context = std::make_unique<Derived>(store, &destroyed);
  context.reset();
  CHECK(destroyed);
}
