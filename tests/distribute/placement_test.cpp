// Device placement that can be checked without a GPU: local_devices() (the CPU here, the GPUs
// where there are some), a VariableStore on another device (floating variables moved there,
// integer ones kept on the host, staged restores), a ModelContext's device, the per-replica
// input copy, the default cross-device ops, and MultiWorkerMirroredStrategy's communication
// choice (NCCL without a GPU is a FailedPreconditionError naming the devices; AUTO is RING).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "nn/context_control.h"
#include "nn/nn.h"
#include "ops/backend.h"
#include "tests/ops/expect_error.h"
#include "tests/skip.h"

#if EST_HAVE_GRPC
#include "distribute/multi_worker_mirrored_strategy.h"
#endif

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

TEST_CASE("placement: local_devices is every GPU, else the CPU") {
  std::vector<std::string> devices = local_devices();
  REQUIRE_FALSE(devices.empty());
  if (!ops::backend_available(ops::Backend::kCuda)) {
    CHECK(devices == std::vector<std::string>{"/cpu:0"});
    CHECK_FALSE(all_gpus(parse_devices(devices)));
  } else {
    CHECK(devices.front() == "/gpu:0");
    CHECK(all_gpus(parse_devices(devices)));
  }
  CHECK_FALSE(all_gpus({}));
  CHECK_FALSE(all_gpus({Device::cuda(0), Device::cpu(0)}));
  CHECK(all_gpus({Device::cuda(0), Device::cuda(1)}));
}

TEST_CASE(
    "placement: a store moves floating variables to its device and keeps integers on the host") {
  nn::VariableStore store(Device::cpu(1));
  CHECK(store.device() == Device::cpu(1));
  Tensor initial = Tensor::from_vector<float>({1, 2, 3});
  Tensor kernel = store.create("kernel", initial, true);
  CHECK(kernel.device() == Device::cpu(1));
  CHECK_FALSE(kernel.shares_storage(initial));  // a copy on the store's device
  CHECK(kernel.requires_grad());
  CHECK(kernel.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(nn::get_or_create_global_step(store).device() == Device::cpu(0));
  CHECK(store.device_for(DType::kI64) == Device::cpu(0));
  CHECK(store.device_for(DType::kF64) == Device::cpu(1));

  // A value restored before the variable exists lands on the store's device too.
  store.restore("bias", Tensor::from_vector<float>({7, 8}));
  Tensor bias = store.create("bias", Tensor::zeros({2}), true);
  CHECK(bias.device() == Device::cpu(1));
  CHECK(bias.to_vector<float>() == std::vector<float>{7, 8});
  // Assigning from the host writes into the variable where it is.
  store.assign("bias", Tensor::from_vector<float>({-1, -2}));
  CHECK(store.get("bias").value.device() == Device::cpu(1));
  CHECK(store.get("bias").value.to_vector<float>() == std::vector<float>{-1, -2});

  // A default store keeps the initial value itself.
  nn::VariableStore host;
  Tensor same = Tensor::from_vector<float>({4});
  CHECK(host.create("v", same, false).shares_storage(same));
}

TEST_CASE("placement: a context computes on its store's device unless told otherwise") {
  nn::VariableStore store;
  nn::ModelContext ctx(store, nn::Mode::kTrain, 1);
  CHECK(ctx.device() == Device::cpu(0));
  nn::ContextControl(ctx).set_device(Device::cpu(1));
  CHECK(ctx.device() == Device::cpu(1));
  // CPU devices share host memory: the variable itself, not a copy.
  Tensor v = ctx.get_variable("w", {2}, DType::kF32, nn::zeros());
  CHECK(v.impl() == store.get("w").value.impl());
}

TEST_CASE("placement: a replica's input is copied to its device once, host devices share it") {
  data::Element element({{"x", Tensor::from_vector<float>({1, 2})}},
                        Tensor::from_vector<int64_t>({0, 1}));
  data::Element same = copy_to_device(element, Device::cpu(1));
  CHECK(same.features.at("x").impl() == element.features.at("x").impl());
  CHECK(same.labels.impl() == element.labels.impl());
  // Every replica of a CPU strategy sees its slice of the batch as it is.
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::vector<data::Element> inputs = split_batch(element, 2);
  PerReplica seen = strategy.run(
      [&](ReplicaContext& replica) {
        CHECK(replica.model_context().device() == replica.device());
        CHECK(replica.store().device() == Device::cpu(0));
        return replica.input().features.at("x");
      },
      inputs);
  CHECK(seen[0].to_vector<float>() == std::vector<float>{1});
  CHECK(seen[1].to_vector<float>() == std::vector<float>{2});
}

TEST_CASE(
    "placement: MirroredStrategy's default cross-device ops are ReductionToOneDevice on CPUs") {
  MirroredStrategy cpus({"/cpu:0", "/cpu:1"});
  CHECK(cpus.cross_device_ops().name() == "ReductionToOneDevice");
  if (!ops::backend_available(ops::Backend::kCuda))
    CHECK(contains(error_message<InvalidArgumentError>([] {
                     MirroredStrategy mixed({"/gpu:0", "/cpu:0"});
                   }),
                   "/gpu:0"));
}

#if EST_HAVE_GRPC
TEST_CASE("placement: communication NCCL needs a GPU; AUTO is NCCL on GPUs with CUDA, else RING") {
  using Impl = CommunicationImplementation;
  CHECK(resolve_communication(Impl::kAuto, {Device::cpu(0)}) == Impl::kRing);
  CHECK(resolve_communication(Impl::kAuto, {Device::cpu(0), Device::cpu(1)}) == Impl::kRing);
  CHECK(resolve_communication(Impl::kAuto, {Device::cuda(0), Device::cpu(0)}) == Impl::kRing);
  CHECK(resolve_communication(Impl::kAuto, {Device::cuda(0)}) ==
        (EST_HAVE_CUDA ? Impl::kNccl : Impl::kRing));
  CHECK(resolve_communication(Impl::kAuto, {Device::cuda(0), Device::cuda(1)}) ==
        (EST_HAVE_CUDA ? Impl::kNccl : Impl::kRing));
  CHECK(resolve_communication(Impl::kRing, {Device::cuda(0)}) == Impl::kRing);
  CHECK(resolve_communication(Impl::kNccl, {Device::cuda(0), Device::cuda(1)}) == Impl::kNccl);
  std::string message = error_message<FailedPreconditionError>(
      [] { resolve_communication(Impl::kNccl, {Device::cpu(0)}); });
  CHECK(contains(message, "NCCL needs a GPU"));
  CHECK(contains(message, "(/cpu:0)"));
  CHECK(contains(message, "kRing"));  // what to do instead
  CHECK(contains(error_message<FailedPreconditionError>([] {
                   resolve_communication(Impl::kNccl, {Device::cuda(0), Device::cpu(0)});
                 }),
                 "(/gpu:0, /cpu:0)"));
  // The strategy fails at construction, before any rendezvous, on a worker without a GPU.
  std::string strategy = error_message<FailedPreconditionError>([] {
    MultiWorkerMirroredStrategy mwms(TfConfig{}, {.implementation = Impl::kNccl},
                                     {.devices = {"/cpu:0"}});
  });
  CHECK(contains(strategy, "NCCL needs a GPU"));
  if (!ops::backend_available(ops::Backend::kCuda))
    CHECK(contains(strategy, ops::backend_unavailable_reason(ops::Backend::kCuda)));
  // AUTO on a CPU worker is RING: the strategy is made (one task: no job to join).
  MultiWorkerMirroredStrategy automatic(TfConfig{}, {.implementation = Impl::kAuto},
                                        {.devices = {"/cpu:0"}});
  CHECK(resolve_communication(automatic.communication_options().implementation,
                              automatic.devices()) == Impl::kRing);
}
#endif
