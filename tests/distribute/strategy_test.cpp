// Strategy plumbing against hand-computed values: all_reduce with both CPU algorithms,
// reduce(kSum | kMean, axis), distribute_dataset's split, input_context, collectives inside
// run(), the default devices and descriptions, and the error cases (bad device names for
// every strategy, GPU devices without the CUDA backend, NCCL on CPU, an indivisible global
// batch, a replica that throws while the others wait in an all-reduce), and the caller's
// thread modes (NoGradGuard, BackendGuard) inside every replica step.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "distribute/distribute.h"
#include "nn/nn.h"
#include "ops/backend.h"
#include "ops/math.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("distribute: all_reduce sums and averages with both CPU algorithms") {
  ReductionToOneDevice one_device;
  HierarchicalCopyAllReduce hierarchical;
  for (const CrossDeviceOps* algorithm : {static_cast<const CrossDeviceOps*>(&one_device),
                                          static_cast<const CrossDeviceOps*>(&hierarchical)}) {
    CAPTURE(algorithm->name());
    for (int replicas : {1, 2, 3, 5}) {
      CAPTURE(replicas);
      std::vector<std::vector<Tensor>> lists;
      for (int r = 0; r < replicas; ++r)
        lists.push_back({Tensor::from_vector<float>({float(r + 1), 10.0f * float(r + 1)}, {2}),
                         Tensor(), Tensor::from_vector<double>({0.5 * r}, {1})});
      std::vector<Tensor> originals = {lists[0][0]};
      std::vector<std::vector<Tensor>*> pointers;
      for (auto& list : lists) pointers.push_back(&list);
      all_reduce(*algorithm, ReduceOp::kSum, pointers);
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
      all_reduce(*algorithm, ReduceOp::kMean, pointers);  // the mean of equal values
      CHECK(values(lists[0][0])[0] == doctest::Approx(n * (n + 1) / 2));
    }
  }
}

TEST_CASE("distribute: all_reduce_slice over the replica threads is bitwise the serial result") {
  // Random float32/float64 lists with an undefined entry; the element sequence (3 + 1000 + 7
  // + 1 values) is cut into ranges that split tensors unevenly. Sums of random floats depend
  // on the order of the additions, so equality means the same order as all_reduce.
  ReductionToOneDevice one_device;
  HierarchicalCopyAllReduce hierarchical;
  for (const CrossDeviceOps* algorithm : {static_cast<const CrossDeviceOps*>(&one_device),
                                          static_cast<const CrossDeviceOps*>(&hierarchical)}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      for (int replicas : {2, 3, 5}) {
        CAPTURE(algorithm->name());
        CAPTURE(replicas);
        ops::Generator generator{uint64_t(replicas)};
        std::vector<std::vector<Tensor>> inputs, serial, outputs;
        for (int r = 0; r < replicas; ++r) {
          inputs.push_back({ops::random_normal({3}, 0, 1, generator),
                            ops::random_normal({10, 100}, 0, 1e3, generator), Tensor(),
                            ops::random_normal({7}, 0, 1, generator, DType::kF64),
                            ops::random_normal({}, 0, 1, generator)});
          serial.push_back({});
          outputs.push_back({});
          for (const Tensor& t : inputs.back()) {
            serial.back().push_back(t.defined() ? t.clone() : Tensor());
            outputs.back().push_back(t.defined() ? Tensor::zeros(t.shape(), t.dtype()) : Tensor());
          }
        }
        std::vector<std::vector<Tensor>*> in, out, whole;
        for (int r = 0; r < replicas; ++r) {
          in.push_back(&inputs[size_t(r)]);
          out.push_back(&outputs[size_t(r)]);
          whole.push_back(&serial[size_t(r)]);
        }
        all_reduce(*algorithm, op, whole);
        std::vector<double> factors(inputs[0].size(), op == ReduceOp::kMean ? 1.0 / replicas : 1.0);
        for (int slice = 0; slice < replicas; ++slice)
          algorithm->reduce_slice(factors, in, out, slice, replicas);
        for (int r = 0; r < replicas; ++r)
          for (size_t i = 0; i < inputs[0].size(); ++i) {
            CAPTURE(i);
            REQUIRE(outputs[size_t(r)][i].defined() == serial[size_t(r)][i].defined());
            if (serial[size_t(r)][i].defined())
              CHECK(outputs[size_t(r)][i].to_vector<double>() ==
                    serial[size_t(r)][i].to_vector<double>());
          }
      }
    }
  }
}

TEST_CASE("distribute: all_reduce rejects lists that differ between replicas") {
  std::vector<Tensor> a = {Tensor::ones({2})}, b = {Tensor::ones({3})}, c = {Tensor()};
  std::vector<std::vector<Tensor>*> shapes = {&a, &b};
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { all_reduce(ReductionToOneDevice(), ReduceOp::kSum, shapes); }),
                 "replica 1"));
  std::vector<std::vector<Tensor>*> missing = {&a, &c};
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { all_reduce(HierarchicalCopyAllReduce(), ReduceOp::kSum, missing); }),
                 "defined on replica 0"));
  std::vector<Tensor> ints = {Tensor::ones({2}, DType::kI64)}, ints2 = ints;
  std::vector<std::vector<Tensor>*> integer = {&ints, &ints2};
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { all_reduce(ReductionToOneDevice(), ReduceOp::kSum, integer); }),
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
    MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, std::make_shared<NcclAllReduce>());
  });
  CHECK(contains(nccl, "NcclAllReduce needs GPU devices"));
  CHECK(contains(nccl, "/cpu:0"));
  CHECK(contains(nccl, "is a CPU device"));
}

TEST_CASE("distribute: every strategy names a bad, repeated or missing device") {
  for (const char* bad : {"/tpu:0", "cpu0", "/cpu:-1", "/cpu:x", "/cpu:1:2"}) {
    CAPTURE(bad);
    std::string mirrored = error_message<InvalidArgumentError>([&] {
      MirroredStrategy strategy({"/cpu:0", bad});
    });
    CHECK(contains(mirrored, std::string("'") + bad + "'"));
    std::string central = error_message<InvalidArgumentError>([&] {
      CentralStorageStrategy strategy({"/cpu:0", bad});
    });
    CHECK(contains(central, std::string("'") + bad + "'"));
    std::string one = error_message<InvalidArgumentError>([&] { OneDeviceStrategy strategy(bad); });
    CHECK(contains(one, std::string("'") + bad + "'"));
  }
  // Two spellings of one device are still one device.
  std::string twice = error_message<InvalidArgumentError>([] {
    CentralStorageStrategy strategy({"/cpu:0", "/cpu:1", "/device:CPU:1"});
  });
  CHECK(contains(twice, "/cpu:1 is listed twice"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [] { CentralStorageStrategy strategy(std::vector<std::string>{}); }),
                 "no devices"));
}

TEST_CASE("distribute: GPU devices need the CUDA backend") {
  if (ops::backend_available(ops::Backend::kCuda))
    return est::testing::skip("this build has the CUDA backend, so GPU devices are accepted");
  std::string mirrored = error_message<InvalidArgumentError>([] {
    MirroredStrategy strategy({"/gpu:0", "/gpu:1"});
  });
  CHECK(contains(mirrored, "/gpu:0"));
  CHECK(contains(mirrored, "CUDA backend"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   CentralStorageStrategy strategy({"/cpu:0", "/device:GPU:0"});
                 }),
                 "/gpu:0"));
  CHECK(contains(error_message<InvalidArgumentError>([] { OneDeviceStrategy strategy("/gpu:3"); }),
                 "/gpu:3"));
  // NCCL on GPU devices fails for the same reason, at construction, not in the first step.
  CHECK(
      contains(error_message<InvalidArgumentError>([] {
                 MirroredStrategy strategy({"/gpu:0", "/gpu:1"}, std::make_shared<NcclAllReduce>());
               }),
               "CUDA backend"));
}

TEST_CASE("distribute: NcclAllReduce on CPU devices is an InvalidArgumentError naming NCCL") {
  std::string message = error_message<InvalidArgumentError>([] {
    MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, std::make_shared<NcclAllReduce>());
  });
  CHECK(contains(message, "NcclAllReduce"));
  CHECK(contains(message, "ReductionToOneDevice"));  // what to use instead
  // A one-device list too: NCCL never runs on a CPU.
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   MirroredStrategy strategy({"/cpu:3"}, std::make_shared<NcclAllReduce>());
                 }),
                 "/cpu:3"));
}

TEST_CASE("distribute: split_batch splits string and sparse batches by rows") {
  // Sparse [4, 3]: row 0 has two entries, row 1 none, row 2 one, row 3 one.
  Tensor sparse = Tensor::sparse(Tensor::from_vector<int64_t>({0, 0, 0, 2, 2, 1, 3, 0}, {4, 2}),
                                 data::string_tensor({"a", "b", "c", "d"}), {4, 3});
  data::Element batch({{"tags", sparse}, {"city", data::string_tensor({"p", "q", "r", "s"})}},
                      Tensor::from_vector<int64_t>({0, 1, 2, 3}));
  std::vector<data::Element> parts = split_batch(batch, 2);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].features.at("city").to_vector<std::string>() ==
        std::vector<std::string>{"p", "q"});
  CHECK(parts[1].features.at("city").to_vector<std::string>() ==
        std::vector<std::string>{"r", "s"});
  const Tensor& first = parts[0].features.at("tags");
  const Tensor& second = parts[1].features.at("tags");
  CHECK(first.shape() == Shape{2, 3});
  CHECK(first.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 2});
  CHECK(first.values().to_vector<std::string>() == std::vector<std::string>{"a", "b"});
  CHECK(second.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(second.values().to_vector<std::string>() == std::vector<std::string>{"c", "d"});
  CHECK(parts[1].labels.to_vector<int64_t>() == std::vector<int64_t>{2, 3});
}
TEST_CASE("distribute: split_batch names both numbers when the batch does not divide") {
  data::Element batch({{"x", Tensor::zeros({5, 2})}}, Tensor::zeros({5}, DType::kI64));
  std::string message = error_message<InvalidArgumentError>([&] { split_batch(batch, 2); });
  CHECK(contains(message, "global batch size 5"));
  CHECK(contains(message, "2 replicas"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { split_batch(batch, 3); }),
                 "global batch size 5 is not divisible by the 3 replicas"));
  CHECK(
      contains(error_message<InvalidArgumentError>([&] { split_batch(batch, 0); }), "0 replicas"));
  CHECK(split_batch(batch, 5).size() == 5);
  data::Element mismatched({{"x", Tensor::zeros({4, 2})}}, Tensor::zeros({6}, DType::kI64));
  std::string sizes = error_message<InvalidArgumentError>([&] { split_batch(mismatched, 2); });
  CHECK(contains(sizes, "batch size 6"));
  CHECK(contains(sizes, "4"));
}

TEST_CASE("distribute: default devices, and the central storage description") {
  if (ops::backend_available(ops::Backend::kCuda))
    return est::testing::skip("a GPU is visible, so the default devices are GPUs (gpu suite)");
  CHECK(local_devices() == std::vector<std::string>{"/cpu:0"});
  MirroredStrategy mirrored;
  CHECK(mirrored.num_replicas_in_sync() == 1);
  CHECK(mirrored.devices() == std::vector<Device>{Device::cpu(0)});
  CHECK(mirrored.description() == "MirroredStrategy with devices (/cpu:0)");
  CHECK(mirrored.variables_mirrored());
  CentralStorageStrategy default_central;
  CHECK(default_central.num_replicas_in_sync() == 1);
  CHECK(default_central.devices() == std::vector<Device>{Device::cpu(0)});

  CentralStorageStrategy central({"/cpu:0", "/device:CPU:1"});
  CHECK(central.name() == "CentralStorageStrategy");
  CHECK(central.description() ==
        "CentralStorageStrategy with devices (/cpu:0, /cpu:1) and variables on /cpu:0");
  CHECK(central.variable_device() == Device::cpu(0));
  CHECK_FALSE(central.variables_mirrored());
  CHECK(central.cross_device_ops().name() == "ReductionToOneDevice");
  CHECK(&central.store(0) == &central.store(1));
  CHECK(&central.model_context(0) != &central.model_context(1));
  CHECK(&central.model_context(1).store() == &central.store(0));
  CHECK(central.input_context().num_replicas_in_sync == 2);
  CHECK(contains(error_message<InvalidArgumentError>([&] { central.store(2); }), "replica 2"));
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
                            std::make_shared<HierarchicalCopyAllReduce>());
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
  const int process_threads = ops::threads_for_local_processes(1);  // the process's share
  CHECK(strategy.threads_per_replica() == std::max(1, process_threads / 2));
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

TEST_CASE("distribute: each replica step runs with the caller's NoGradGuard and BackendGuard") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  // What each replica saw: whether ops recorded gradients, the CPU backend, and whether an op
  // on a trainable variable put a node on the tape.
  struct Seen {
    bool grad_enabled = false;
    std::optional<ops::Backend> backend;  // the guard's, if any
    bool recorded = false;
  };
  auto step = [&] {
    std::vector<Seen> seen(2);
    strategy.run([&](ReplicaContext& replica) {
      ModelContext& ctx = replica.model_context();
      ctx.begin_call();
      Tensor y = nn::dense(ctx, Tensor::ones({2, 3}), {.units = 1});
      seen[size_t(replica.replica_id())] = {ops::grad_enabled(), ops::forced_cpu_backend(),
                                            y.requires_grad()};
      return Tensor();
    });
    return seen;
  };
  {
    ops::NoGradGuard no_grad;
    for (const Seen& replica : step()) {
      CHECK_FALSE(replica.grad_enabled);
      CHECK_FALSE(replica.recorded);
    }
  }
  // Back on after the guard (the replica threads do not keep the last caller's mode).
  for (const Seen& replica : step()) {
    CHECK(replica.grad_enabled);
    CHECK(replica.recorded);
    CHECK_FALSE(replica.backend.has_value());  // no guard: each op kind follows the table
  }
  for (ops::Backend backend : ops::available_cpu_backends()) {
    CAPTURE(ops::backend_name(backend));
    ops::BackendGuard guard(backend);
    for (const Seen& replica : step()) CHECK(replica.backend == backend);
  }
}

TEST_CASE("distribute: run_train_op needs a context that defers its moving averages") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  std::vector<std::unique_ptr<ModelContext>> contexts;
  for (int r = 0; r < 2; ++r) {
    stores.push_back(std::make_unique<nn::VariableStore>());
    contexts.push_back(std::make_unique<ModelContext>(*stores.back()));  // defers nothing
  }
  std::string message = error_message<FailedPreconditionError>([&] {
    strategy.run([&](ReplicaContext& replica) {
      ModelContext& ctx = *contexts[size_t(replica.replica_id())];
      ctx.begin_call();
      Tensor loss = ops::sum(nn::dense(ctx, Tensor::ones({2, 3}), {.units = 1}));
      replica.run_train_op(optim::sgd(0.1).minimize(loss, ctx), 1.0, &ctx);
      return loss;
    });
  });
  CHECK(contains(message, "configure_replica_context(ctx)"));
}
