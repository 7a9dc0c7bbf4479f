// The strategies on GPUs (built everywhere, exits 77 where no GPU can run): every replicated
// run below is compared with the same run on CPU devices, variables within
// |a - b| <= 1e-4 * (1 + |b|) after a few steps (float32 sums on the GPU in another order).
// The model is an MLP with a mean squared error loss (ops with CUDA kernels). Cases:
// - MirroredStrategy on /gpu:0: variables (and optimizer slots) on the GPU, global_step on the
//   host, the input batches copied there, the result equal to /cpu:0's;
// - two replicas on one GPU: est has no logical GPU devices ("/gpu:0" twice is refused), so
//   the second replica runs on the host: ("/gpu:0", "/cpu:0") with ReductionToOneDevice and
//   HierarchicalCopyAllReduce (reduction through host copies) against ("/cpu:0", "/cpu:1");
// - every cross-device op on GPU tensors (all_reduce outside replica context) against the CPU
//   result: NcclAllReduce over one GPU (a one-rank communicator), and over every GPU when
//   there are two or more;
// - CentralStorageStrategy on /gpu:0: variables on the host, compute on the GPU;
// - with two GPUs or more: MirroredStrategy over them with its default (NCCL);
// - the Estimator end to end on /gpu:0 (the default placement) against RunConfig::device
//   "/cpu:0": the same loss after training and the same evaluation metrics within 1e-4, and a
//   checkpoint written from GPU variables evaluated by a CPU Estimator to the same loss;
// - MultiWorkerMirroredStrategy with NCCL: tests/distribute/nccl_multi_worker_gpu_test.cpp.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "estimator/estimator.h"
#include "nn/nn.h"
#include "ops/backend.h"
#include "tests/distribute/training_util.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/skip.h"

using namespace est;
using namespace est::distribute;
using est::testing::make_batch;
using est::testing::max_scaled_difference;

namespace {

constexpr double kGpuTolerance = 1e-4;

Tensor regression_mlp(nn::ModelContext& ctx, const Tensor& x) {
  Tensor h = nn::dense(ctx, x, {.units = 8, .activation = nn::relu});
  return nn::dense(ctx, h, {.units = 1});
}

// A deterministic regression batch: make_batch's features, targets their sum.
data::Element regression_batch(int64_t batch, uint64_t step) {
  data::Element element = make_batch({batch, 4}, step);
  Tensor x = element.features.at("x");
  element.labels = ops::sum(x, {1}, /*keepdims=*/true);
  return element;
}

// Trains `steps` steps on `strategy` (the loss scaled as the Estimator does) and returns
// replica 0's variables, on the host, by name.
std::map<std::string, Tensor> train(Strategy& strategy, const testing::MakeOptimizer& optimizer,
                                    int steps = 4) {
  for (int step = 0; step < steps; ++step) {
    data::Element batch = regression_batch(8, uint64_t(step));
    strategy.run(
        [&](ReplicaContext& replica) {
          nn::ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          const data::Element& input = replica.input();
          if (replica.device().is_cuda())  // copied there; host devices share the batch
            CHECK(input.features.at("x").device() == replica.device());
          Tensor loss =
              nn::mean_squared_error(input.labels, regression_mlp(ctx, input.features.at("x")));
          replica.run_train_op(optimizer().minimize(loss, ctx),
                               1.0 / replica.num_replicas_in_sync());
          return loss;
        },
        split_batch(batch, strategy.num_local_replicas()));
  }
  std::map<std::string, Tensor> out;
  for (const nn::Variable& v : strategy.store(0).variables())
    out[v.name] = v.value.to(Device::cpu());
  return out;
}

void check_close(const std::map<std::string, Tensor>& got,
                 const std::map<std::string, Tensor>& expected) {
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, value] : expected) {
    CAPTURE(name);
    REQUIRE(got.count(name));
    CHECK(max_scaled_difference(got.at(name), value) <= kGpuTolerance);
  }
}

std::vector<testing::NamedOptimizer> optimizers() {
  return {{"sgd", [] { return optim::sgd(0.1); }, ""},
          {"adam", [] { return optim::adam(0.01); }, "dense/kernel/Adam"}};
}

int gpu_count() { return static_cast<int>(local_devices().size()); }

}  // namespace

TEST_CASE("gpu strategy: local_devices lists the GPUs and MirroredStrategy takes them") {
  std::vector<std::string> devices = local_devices();
  REQUIRE(devices.front() == "/gpu:0");
  MirroredStrategy strategy;
  CHECK(strategy.num_local_replicas() == gpu_count());
  CHECK(strategy.devices().front() == Device::cuda(0));
  if (gpu_count() > 1) CHECK(strategy.cross_device_ops().name() == "NcclAllReduce");
}

TEST_CASE("gpu strategy: MirroredStrategy on /gpu:0 matches /cpu:0") {
  for (const auto& optimizer : optimizers()) {
    CAPTURE(optimizer.name);
    MirroredStrategy gpu({"/gpu:0"}), cpu({"/cpu:0"});
    std::map<std::string, Tensor> expected = train(cpu, optimizer.make);
    std::map<std::string, Tensor> got = train(gpu, optimizer.make);
    check_close(got, expected);
    CHECK(gpu.store(0).get("dense/kernel").value.device() == Device::cuda(0));
    if (!optimizer.slot.empty())
      CHECK(gpu.store(0).get(optimizer.slot).value.device() == Device::cuda(0));
    CHECK(gpu.store(0).get("global_step").value.device() == Device::cpu(0));
    CHECK(nn::read_global_step(gpu.store(0)) == 4);
  }
}

TEST_CASE("gpu strategy: two replicas, /gpu:0 and the host, with both copy algorithms") {
  CHECK_THROWS_AS(MirroredStrategy({"/gpu:0", "/gpu:0"}), InvalidArgumentError);
  for (const char* algorithm : {"ReductionToOneDevice", "HierarchicalCopyAllReduce"}) {
    CAPTURE(algorithm);
    auto make_ops = [&]() -> std::shared_ptr<CrossDeviceOps> {
      if (std::string(algorithm) == "ReductionToOneDevice")
        return std::make_shared<ReductionToOneDevice>();
      return std::make_shared<HierarchicalCopyAllReduce>();
    };
    MirroredStrategy mixed({"/gpu:0", "/cpu:0"}, make_ops());
    MirroredStrategy cpus({"/cpu:0", "/cpu:1"}, make_ops());
    check_close(train(mixed, [] { return optim::adam(0.01); }),
                train(cpus, [] { return optim::adam(0.01); }));
    CHECK(mixed.store(0).get("dense/kernel").value.device() == Device::cuda(0));
    CHECK(mixed.store(1).get("dense/kernel").value.device() == Device::cpu(0));
    // The mirrored copies stay equal across devices (the same sums, copied; the updates on
    // the GPU and the host may round differently).
    CHECK(max_scaled_difference(mixed.store(0).get("dense/kernel").value.to(Device::cpu()),
                                mixed.store(1).get("dense/kernel").value) <= kGpuTolerance);
  }
}

TEST_CASE("gpu strategy: every cross-device op on GPU tensors gives the CPU result") {
  auto lists_on = [](const std::vector<Device>& devices) {
    std::vector<std::vector<Tensor>> lists;
    for (size_t r = 0; r < devices.size(); ++r) {
      ops::Generator generator(10 + r);
      std::vector<float> a(3000), b(7);
      for (auto& v : a) v = float(generator.next_normal());
      for (auto& v : b) v = float(generator.next_normal());
      lists.push_back({Tensor::from_vector<float>(a, {30, 100}).to(devices[r]), Tensor(),
                       Tensor::from_vector<float>(b).to(devices[r])});
    }
    return lists;
  };
  auto reduce = [](const CrossDeviceOps& algorithm, ReduceOp op,
                   std::vector<std::vector<Tensor>> lists) {
    std::vector<std::vector<Tensor>*> pointers;
    for (auto& list : lists) pointers.push_back(&list);
    all_reduce(algorithm, op, pointers);
    return lists;
  };
  ReductionToOneDevice one_device;
  HierarchicalCopyAllReduce hierarchical;
  NcclAllReduce nccl;
  std::vector<std::vector<Device>> device_sets = {{Device::cuda(0)},
                                                  {Device::cuda(0), Device::cpu(0)}};
  if (gpu_count() > 1) device_sets.push_back({Device::cuda(0), Device::cuda(1)});
  for (const auto& devices : device_sets) {
    std::vector<Device> host(devices.size(), Device::cpu(0));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      std::vector<std::vector<Tensor>> expected = reduce(one_device, op, lists_on(host));
      std::vector<const CrossDeviceOps*> algorithms = {&one_device, &hierarchical};
      if (all_gpus(devices)) algorithms.push_back(&nccl);
      for (const CrossDeviceOps* algorithm : algorithms) {
        CAPTURE(algorithm->name());
        CAPTURE(devices.size());
        std::vector<std::vector<Tensor>> got = reduce(*algorithm, op, lists_on(devices));
        for (size_t r = 0; r < devices.size(); ++r) {
          CHECK_FALSE(got[r][1].defined());
          for (size_t i : {size_t{0}, size_t{2}}) {
            CHECK(got[r][i].device() == devices[r]);  // every replica's result where it is
            CHECK(max_scaled_difference(got[r][i], expected[r][i]) <= 1e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("gpu strategy: CentralStorageStrategy keeps variables on the host, computes on /gpu:0") {
  CentralStorageStrategy gpu({"/gpu:0"}), cpu({"/cpu:0"});
  check_close(train(gpu, [] { return optim::adam(0.01); }),
              train(cpu, [] { return optim::adam(0.01); }));
  CHECK(gpu.store(0).get("dense/kernel").value.device() == Device::cpu(0));
  CHECK(gpu.store(0).get("dense/kernel/Adam").value.device() == Device::cpu(0));
  CHECK(gpu.model_context(0).device() == Device::cuda(0));
}

TEST_CASE("gpu strategy: MirroredStrategy over two GPUs with NCCL matches the CPUs") {
  if (gpu_count() < 2)
    return est::testing::skip("needs 2 GPUs; this machine has " + std::to_string(gpu_count()));
  MirroredStrategy gpus({"/gpu:0", "/gpu:1"}), cpus({"/cpu:0", "/cpu:1"});
  CHECK(gpus.cross_device_ops().name() == "NcclAllReduce");
  check_close(train(gpus, [] { return optim::adam(0.01); }),
              train(cpus, [] { return optim::adam(0.01); }));
  CHECK(gpus.store(1).get("dense/kernel").value.device() == Device::cuda(1));
}

TEST_CASE("gpu strategy: the Estimator trains on /gpu:0 by default as on /cpu:0") {
  using namespace est_test;
  TempDir gpu_dir, cpu_dir;
  RunConfig gpu_config = quiet_config(gpu_dir.str());
  RunConfig cpu_config = quiet_config(cpu_dir.str());
  cpu_config.device = "/cpu:0";
  LogCapture log;
  Estimator on_gpu(linear_model_fn, gpu_config);
  Estimator on_cpu(linear_model_fn, cpu_config);
  on_gpu.train(linear_input_fn(64, 8, false, 5));
  on_cpu.train(linear_input_fn(64, 8, false, 5));
  CHECK(log.text().find("Running the model on /gpu:0.") != std::string::npos);
  Metrics gpu_metrics = on_gpu.evaluate(linear_input_fn());
  Metrics cpu_metrics = on_cpu.evaluate(linear_input_fn());
  for (const char* name : {"loss", "mae", "rmse"}) {
    CAPTURE(name);
    CHECK(gpu_metrics.at(name) == doctest::Approx(cpu_metrics.at(name)).epsilon(kGpuTolerance));
  }
  // The checkpoint written from GPU variables, read by an Estimator on the CPU.
  RunConfig reader_config = quiet_config(gpu_dir.str());
  reader_config.device = "/cpu:0";
  Estimator reader(linear_model_fn, reader_config);
  CHECK(reader.evaluate(linear_input_fn()).at("loss") ==
        doctest::Approx(gpu_metrics.at("loss")).epsilon(1e-5));
}
