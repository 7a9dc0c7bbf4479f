// Deferred tensors (ops/deferred_fill.h): filled once on first access, from any handle on the
// storage; concurrent readers wait for the one fill; a fill that throws leaves the tensor
// pending for the next access; a tensor dropped unread is never filled; recipes by kind.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ops/deferred_fill.h"
#include "ops/ops.h"

using namespace est;
using namespace est::ops;

namespace {
const char kKind = 0;
const char kOtherKind = 0;
}  // namespace

TEST_CASE("a deferred tensor is filled once, on first access, and its recipe is found by kind") {
  std::atomic<int> fills{0};
  const int64_t pending = pending_deferred_fills();
  auto recipe = std::make_shared<int>(42);
  Tensor t = deferred_tensor(
      {2, 3}, DType::kF32,
      [&](Tensor& out) {
        ++fills;
        out.fill(1.5);  // the fill's own writes pass the fence
      },
      recipe, &kKind);
  CHECK(pending_deferred_fills() == pending + 1);
  CHECK(deferred_recipe(t, &kKind) == recipe);
  CHECK(deferred_recipe(t, &kOtherKind) == nullptr);
  CHECK(deferred_recipe(Tensor::zeros({2}), &kKind) == nullptr);
  CHECK(fills == 0);
  CHECK(t.to_vector<float>() == std::vector<float>(6, 1.5f));
  CHECK(t.to_vector<float>() == std::vector<float>(6, 1.5f));
  CHECK(fills == 1);
  CHECK(deferred_recipe(t, &kKind) == nullptr);
  CHECK(pending_deferred_fills() == pending);
  {
    Tensor dropped = deferred_tensor(
        {4}, DType::kF32, [&](Tensor&) { ++fills; }, recipe, &kKind);
  }
  CHECK(fills == 1);
  CHECK(pending_deferred_fills() == pending);
  CHECK(recipe.use_count() == 1);  // the dropped recipe was released
}

TEST_CASE("concurrent readers of a deferred tensor wait for its one fill") {
  std::atomic<int> fills{0};
  Tensor t = deferred_tensor(
      {1000}, DType::kF32,
      [&](Tensor& out) {
        ++fills;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        out.fill(3.0);
      },
      nullptr, &kKind);
  std::vector<std::thread> readers;
  std::atomic<int> right{0};
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&] {
      const float* p = t.data<float>();
      if (p[0] == 3.0f && p[999] == 3.0f) ++right;
    });
  for (std::thread& reader : readers) reader.join();
  CHECK(fills == 1);
  CHECK(right == 4);
}

TEST_CASE("a deferred tensor whose fill throws stays pending for the next access") {
  int attempts = 0;
  Tensor t = deferred_tensor(
      {3}, DType::kF32,
      [&](Tensor& out) {
        if (++attempts == 1) throw std::runtime_error("first fill fails");
        out.fill(2.0);
      },
      nullptr, &kKind);
  CHECK_THROWS_AS(t.data<float>(), std::runtime_error);
  CHECK(t.to_vector<float>() == std::vector<float>(3, 2.0f));
  CHECK(attempts == 2);
}
