// Strategy plumbing against hand-computed values: all_reduce with both CPU algorithms,
// reduce(kSum | kMean, axis), distribute_dataset's split, input_context, collectives inside
// run(), and the error cases (bad device names, NCCL on CPU, an indivisible global batch,
// a replica that throws while the others wait in an all-reduce).
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "distribute/distribute.h"
#include "ops/backend.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("distribute: all_reduce sums and averages with both CPU algorithms") {
  for (CrossDeviceOps algorithm :
       {CrossDeviceOps::kReductionToOneDevice, CrossDeviceOps::kHierarchicalCopyAllReduce}) {
    CAPTURE(cross_device_ops_name(algorithm));
    for (int replicas : {1, 2, 3, 5}) {
      CAPTURE(replicas);
      std::vector<std::vector<Tensor>> lists;
      for (int r = 0; r < replicas; ++r)
        lists.push_back({Tensor::from_vector<float>({float(r + 1), 10.0f * float(r + 1)}, {2}),
                         Tensor(), Tensor::from_vector<double>({0.5 * r}, {1})});
      std::vector<Tensor> originals = {lists[0][0]};
      std::vector<std::vector<Tensor>*> pointers;
      for (auto& list : lists) pointers.push_back(&list);
      all_reduce(algorithm, ReduceOp::kSum, pointers);
      // 1 + 2 + ... + n and 0.5 * (0 + 1 + ... + n-1), by hand.
      float n = float(replicas);
      for (int r = 0; r < replicas; ++r) {
        CHECK(values(lists[size_t(r)][0]) ==
              std::vector<float>{n * (n + 1) / 2, 10 * n * (n + 1) / 2});
        CHECK_FALSE(lists[size_t(r)][1].defined());
        CHECK(lists[size_t(r)][2].to_vector<double>()[0] == doctest::Approx(0.25 * n * (n - 1)));
      }
      // Replicas own distinct buffers, and the input buffer was not overwritten.
      if (replicas > 1) CHECK_FALSE(lists[0][0].shares_storage(lists[1][0]));
      CHECK(values(originals[0]) == std::vector<float>{1.0f, 10.0f});
      all_reduce(algorithm, ReduceOp::kMean, pointers);  // the mean of equal values
      CHECK(values(lists[0][0])[0] == doctest::Approx(n * (n + 1) / 2));
    }
  }
}

TEST_CASE("distribute: all_reduce rejects lists that differ between replicas") {
  std::vector<Tensor> a = {Tensor::ones({2})}, b = {Tensor::ones({3})}, c = {Tensor()};
  std::vector<std::vector<Tensor>*> shapes = {&a, &b};
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   all_reduce(CrossDeviceOps::kReductionToOneDevice, ReduceOp::kSum, shapes);
                 }),
                 "replica 1"));
  std::vector<std::vector<Tensor>*> missing = {&a, &c};
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   all_reduce(CrossDeviceOps::kHierarchicalCopyAllReduce, ReduceOp::kSum, missing);
                 }),
                 "defined on replica 0"));
  std::vector<Tensor> ints = {Tensor::ones({2}, DType::kI64)}, ints2 = ints;
  std::vector<std::vector<Tensor>*> integer = {&ints, &ints2};
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   all_reduce(CrossDeviceOps::kReductionToOneDevice, ReduceOp::kSum, integer);
                 }),
                 "float"));
}

TEST_CASE("distribute: strategies describe their devices and input context") {
  MirroredStrategy mirrored({"/cpu:0", "/cpu:1"});
  CHECK(mirrored.num_replicas_in_sync() == 2);
  CHECK(mirrored.is_chief());
  CHECK(mirrored.description() == "MirroredStrategy with devices (/cpu:0, /cpu:1)");
  CHECK(mirrored.devices()[1] == Device::cpu(1));
  data::InputContext ctx = mirrored.input_context(0);
  CHECK(ctx.num_input_pipelines == 1);
  CHECK(ctx.input_pipeline_id == 0);
  CHECK(ctx.num_replicas_in_sync == 2);
  CHECK(ctx.get_per_replica_batch_size(64) == 32);
  CHECK(contains(error_message<InvalidArgumentError>([&] { mirrored.input_context(1); }),
                 "pipeline id 1"));

  OneDeviceStrategy one("/cpu:0");
  CHECK(one.num_replicas_in_sync() == 1);
  CHECK(one.description() == "OneDeviceStrategy with devices (/cpu:0)");
}

TEST_CASE("distribute: bad devices and NCCL on CPU devices are clear errors") {
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   MirroredStrategy strategy({"/cpu:0", "/banana:1"});
                 }),
                 "banana"));
  CHECK(
      contains(error_message<InvalidArgumentError>([] { OneDeviceStrategy strategy("cpu zero"); }),
               "cpu zero"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   MirroredStrategy strategy({"/cpu:0", "/cpu:0"});
                 }),
                 "listed twice"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [] { MirroredStrategy strategy(std::vector<std::string>{}); }),
                 "no devices"));
  std::string nccl = error_message<InvalidArgumentError>([] {
    MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, CrossDeviceOps::kNcclAllReduce);
  });
  CHECK(contains(nccl, "NcclAllReduce needs GPU devices"));
  CHECK(contains(nccl, "/cpu:0"));
  CHECK(contains(nccl, "CUDA backend is not built"));
}

TEST_CASE("distribute: run gives each replica its id and input; reduce sums and averages") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::vector<data::Element> inputs = {data::Element(Tensor::from_vector<float>({1, 2}, {2})),
                                       data::Element(Tensor::from_vector<float>({3, 4}, {2}))};
  std::vector<int> seen(2, -1);
  PerReplica out = strategy.run(
      [&](ReplicaContext& replica) {
        seen[size_t(replica.replica_id())] = replica.replica_id();
        CHECK(replica.num_replicas_in_sync() == 2);
        CHECK(replica.device() == Device::cpu(replica.replica_id()));
        CHECK(&replica.store() == &strategy.store(replica.replica_id()));
        return replica.input().value.clone();
      },
      inputs);
  CHECK(seen == std::vector<int>{0, 1});
  REQUIRE(out.size() == 2);
  CHECK(values(strategy.reduce(ReduceOp::kSum, out)) == std::vector<float>{4, 6});
  CHECK(values(strategy.reduce(ReduceOp::kMean, out)) == std::vector<float>{2, 3});
  CHECK(strategy.reduce(ReduceOp::kSum, out, 0).item() == doctest::Approx(10.0));
  CHECK(strategy.reduce(ReduceOp::kMean, out, 0).item() == doctest::Approx(2.5));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { strategy.reduce(ReduceOp::kSum, out, 1); }),
      "axis 1"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { strategy.run([](ReplicaContext&) { return Tensor(); }, {inputs[0]}); }),
                 "got 1 inputs for 2 replicas"));
}

TEST_CASE("distribute: all_reduce inside run, and a failing replica does not hang the others") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1", "/cpu:2"},
                            CrossDeviceOps::kHierarchicalCopyAllReduce);
  PerReplica out = strategy.run([](ReplicaContext& replica) {
    std::vector<Tensor> list = {Tensor::full({2}, double(replica.replica_id() + 1))};
    replica.all_reduce(ReduceOp::kMean, list);  // (1 + 2 + 3) / 3
    return list[0];
  });
  for (size_t r = 0; r < 3; ++r) CHECK(values(out[r]) == std::vector<float>{2, 2});

  std::string message = error_message<InvalidArgumentError>([&] {
    strategy.run([](ReplicaContext& replica) {
      if (replica.replica_id() == 1) throw InvalidArgumentError("replica one is broken");
      std::vector<Tensor> list = {Tensor::ones({2})};
      replica.all_reduce(ReduceOp::kSum, list);
      return list[0];
    });
  });
  CHECK(message == "replica one is broken");
  // The pool is usable again after a failed step.
  PerReplica again = strategy.run([](ReplicaContext& replica) {
    std::vector<Tensor> list = {Tensor::ones({1})};
    replica.all_reduce(ReduceOp::kSum, list);
    return list[0];
  });
  CHECK(again[2].item() == 3.0);
}

TEST_CASE("distribute: distribute_dataset splits global batches row-wise per replica") {
  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  Tensor features = Tensor::from_vector<float>(x, {8, 2});
  Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7});
  data::Dataset dataset = data::Dataset::from_tensor_slices({{"x", features}}, labels).batch(4);
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  auto iterator = strategy.distribute_dataset(dataset).iterator();
  auto first = iterator.next();
  REQUIRE(first.has_value());
  REQUIRE(first->size() == 2);
  CHECK((*first)[0].labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK((*first)[1].labels.to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  CHECK((*first)[1].features.at("x").shape() == Shape{2, 2});
  CHECK(values((*first)[1].features.at("x")) == std::vector<float>{4, 5, 6, 7});
  auto second = iterator.next();
  REQUIRE(second.has_value());
  CHECK((*second)[1].labels.to_vector<int64_t>() == std::vector<int64_t>{6, 7});
  CHECK_FALSE(iterator.next().has_value());

  data::Dataset odd = data::Dataset::from_tensor_slices({{"x", features}}, labels).batch(3);
  auto odd_iterator = strategy.distribute_dataset(odd).iterator();
  std::string message = error_message<InvalidArgumentError>([&] { odd_iterator.next(); });
  CHECK(contains(message, "global batch size 3"));
  CHECK(contains(message, "2 replicas"));
}

TEST_CASE("distribute: each replica thread gets its share of the cores") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(strategy.threads_per_replica() == std::max(1, cores / 2));
  std::vector<int> threads(2, 0);
  std::vector<std::thread::id> ids(2);
  strategy.run([&](ReplicaContext& replica) {
    threads[size_t(replica.replica_id())] = ops::num_threads();
    ids[size_t(replica.replica_id())] = std::this_thread::get_id();
    return Tensor();
  });
  CHECK(threads == std::vector<int>(2, strategy.threads_per_replica()));
  CHECK(ids[0] != ids[1]);
  CHECK(ids[0] != std::this_thread::get_id());
}
