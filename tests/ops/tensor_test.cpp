// Tensor handles, creation, access, reshape, devices, dtypes and the caching allocator.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "ops/allocator.h"
#include "ops/device.h"
#include "ops/tensor.h"

using namespace est;
using namespace est::ops;

TEST_CASE("tensor creation and access") {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == DType::kF32);
  CHECK(t.numel() == 6);
  CHECK(t.at({1, 2}) == 6.0);
  CHECK(t.dim(-1) == 3);
  CHECK_THROWS_AS(t.dim(2), InvalidArgumentError);
  CHECK_THROWS_AS(t.at({2, 0}), OutOfRangeError);
  CHECK_THROWS_AS(t.data<double>(), InvalidArgumentError);
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), InvalidArgumentError);

  Tensor z = Tensor::zeros({3}, DType::kI64);
  CHECK(z.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  Tensor f = Tensor::full({2}, 2.5, DType::kF64);
  CHECK(f.to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(Tensor::scalar(3.0).item() == 3.0);
  CHECK(Tensor::scalar(3.0).rank() == 0);
  CHECK_FALSE(Tensor().defined());
  CHECK_THROWS_AS(Tensor().shape(), FailedPreconditionError);
}

TEST_CASE("tensors share storage; clone copies") {
  Tensor a = Tensor::ones({4});
  Tensor b = a;
  b.data<float>()[0] = 7;
  CHECK(a.at({0}) == 7.0);
  Tensor c = a.clone();
  c.data<float>()[0] = 1;
  CHECK(a.at({0}) == 7.0);
  CHECK(a.shares_storage(b));
  CHECK_FALSE(a.shares_storage(c));
}

TEST_CASE("reshape infers one dimension and checks sizes") {
  Tensor t = Tensor::zeros({2, 3, 4});
  CHECK(t.reshape({6, -1}).shape() == Shape{6, 4});
  CHECK(t.reshape({-1}).shape() == Shape{24});
  CHECK(t.reshape({6, -1}).shares_storage(t));
  CHECK_THROWS_AS(t.reshape({5, -1}), InvalidArgumentError);
  CHECK_THROWS_AS(t.reshape({-1, -1}), InvalidArgumentError);
  CHECK_THROWS_AS(t.reshape({7}), InvalidArgumentError);
}

TEST_CASE("device names parse as TensorFlow writes them") {
  CHECK(Device::parse("/cpu:0") == Device::cpu(0));
  CHECK(Device::parse("/gpu:1") == Device::cuda(1));
  CHECK(Device::parse("/job:worker/replica:0/task:1/device:GPU:2") == Device::cuda(2));
  CHECK(Device::parse("CPU:3") == Device::cpu(3));
  CHECK(Device::cuda(1).str() == "/gpu:1");
  CHECK_THROWS_AS(Device::parse("/tpu:0"), InvalidArgumentError);
  CHECK_THROWS_AS(Device::parse("/gpu:x"), InvalidArgumentError);
}

TEST_CASE("the caching allocator reuses freed blocks") {
  Allocator& allocator = allocator_for(Device::cpu());
  { Tensor warm = Tensor::empty({1000, 37}); }
  int64_t before = allocator.stats().system_allocations;
  for (int i = 0; i < 10; ++i) {
    Tensor t = Tensor::empty({1000, 37});
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  }
  CHECK(allocator.stats().system_allocations == before);
  CHECK_THROWS_AS(allocator_for(Device::cuda(0)), FailedPreconditionError);
}

TEST_CASE("printing shows shape, dtype and values") {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3});
  CHECK(t.str() == "Tensor([1, 2, 3], shape=[3], dtype=int32, device=/cpu:0)");
  CHECK(fmt::format("{}", t) == t.str());
  CHECK(fmt::format("{}", Tensor::full({20}, 0.5))
            .ends_with("0.5, ...], shape=[20], dtype=float32, device=/cpu:0)"));
}
