// ParameterServerStrategy in the custom training loop, in one process: a PsServer on a
// loopback port, and chief and worker strategies (distribute/ps/parameter_server_strategy.h)
// whose steps push to it. run_train_op and apply_gradients inside strategy.run both send the
// gradients to the owner, which applies them; the replica's store holds the fresh values after
// the step; a worker starts from the chief's values, not its own initializer's; the input
// context is one pipeline per training task; each worker's moving average (batch norm's
// statistics) is applied on the ps task; without ps tasks the strategy trains locally.
#include <doctest/doctest.h>

#include <functional>

#include "distribute/ps/parameter_server_strategy.h"
#include "distribute/ps/ps_server.h"
#include "nn/nn.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/math.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

const std::string kToken = "ps-strategy-test-token-0123";

// One ps task (SGD 0.5) whose job ends when `num_workers` training tasks are done, and the
// TF_CONFIGs of the chief and worker 0 of that job (a chief, one worker, the ps task).
struct OnePsJob {
  explicit OnePsJob(int num_workers)
      : servers(testing::start_ps_servers(
            1, {.token = kToken, .num_workers = num_workers, .optimizer = nn::optim::sgd(0.5)})),
        server(*servers[0]),
        chief(testing::ps_job_config({server.address()}, 1, {TaskType::kChief, 0})),
        worker(chief) {
    worker.task = TaskSpec{TaskType::kWorker, 0};
  }

  std::vector<std::unique_ptr<PsServer>> servers;
  PsServer& server;
  TfConfig chief;
  TfConfig worker;
};

// loss = sum(w * x) over w = get_variable("w", [2], init): d loss / d w = x.
Tensor step(ReplicaContext& replica, float init, bool through_apply_gradients) {
  nn::ModelContext& ctx = replica.model_context();
  ctx.begin_call();
  Tensor w = ctx.get_variable("w", {2}, DType::kF32, nn::constant(init));
  Tensor loss = ops::sum(ops::mul(w, Tensor::from_vector<float>({1, -2})));
  auto sgd = nn::optim::sgd(0.5);
  if (through_apply_gradients) {
    std::vector<Tensor> grads = ops::gradients(loss, {w});
    sgd.apply_gradients(ctx, grads, {w});
  } else {
    replica.run_train_op(sgd.minimize(loss, ctx));
  }
  return loss;
}

// A batch-norm-like step: a non-trainable moving mean (momentum 0.5) moves towards this batch's
// statistic (batch, 2 * batch) as the trainable "w" is trained.
std::function<Tensor(ReplicaContext&)> step_with_statistic(float batch) {
  return [batch](ReplicaContext& r) {
    nn::ModelContext& ctx = r.model_context();
    ctx.begin_call();
    Tensor w = ctx.get_variable("w", {2}, DType::kF32, nn::constant(1.0f));
    Tensor mean = ctx.get_variable("moving_mean", {2}, DType::kF32, nn::constant(0.0f), false);
    ctx.update_moving_average(mean, Tensor::from_vector<float>({batch, 2 * batch}), 0.5);
    Tensor loss = ops::sum(ops::mul(w, Tensor::from_vector<float>({1, -2})));
    r.run_train_op(nn::optim::sgd(0.5).minimize(loss, ctx));
    return loss;
  };
}

}  // namespace

TEST_CASE("ParameterServerStrategy: the custom loop's steps are applied by the ps task") {
  OnePsJob job(2);
  {
    ParameterServerStrategy chief(job.chief, {.token = kToken});
    CHECK(chief.has_parameter_servers());
    CHECK(chief.is_chief());
    CHECK(chief.num_workers() == 1);  // asynchronous: no worker steps with another
    CHECK(chief.input_context().num_input_pipelines == 2);
    CHECK(chief.input_context().input_pipeline_id == 0);
    chief.run([](ReplicaContext& r) { return step(r, 1.0f, false); });
    // w = 1 - 0.5 * (1, -2), applied on the ps task and pulled back.
    CHECK(chief.store(0).get("w").value.to_vector<float>() == std::vector<float>{0.5f, 2.0f});
    CHECK(chief.store(0).get("global_step").value.item() == 1);
    CHECK(job.server.names() == std::vector<std::string>{"global_step", "w"});

    ParameterServerStrategy worker(job.worker, {.token = kToken});
    CHECK_FALSE(worker.is_chief());
    CHECK(worker.input_context().input_pipeline_id == 1);
    // Its own initializer says 7; it starts from the chief's value on the ps task instead.
    worker.run([](ReplicaContext& r) { return step(r, 7.0f, true); });
    CHECK(worker.store(0).get("w").value.to_vector<float>() == std::vector<float>{0.0f, 3.0f});
    CHECK(worker.store(0).get("global_step").value.item() == 2);
    CHECK(job.server.updates_applied() == 2);
  }
  // Both strategies said they are done: the ps task's job is over.
  CHECK_NOTHROW(job.server.join(std::chrono::seconds(5)));
}

TEST_CASE("ParameterServerStrategy: an embedding's row-sparse gradient reaches the ps task") {
  OnePsJob job(1);
  {
    ParameterServerStrategy chief(job.chief, {.token = kToken});
    chief.run([](ReplicaContext& r) {
      nn::ModelContext& ctx = r.model_context();
      ctx.begin_call();
      Tensor table = ctx.get_variable("table", {4, 2}, DType::kF32, nn::constant(1.0f));
      Tensor rows = ops::gather(table, Tensor::from_vector<int64_t>({1, 3, 3}));
      Tensor loss = ops::sum(rows);
      r.run_train_op(nn::optim::sgd(0.5).minimize(loss, ctx));
      return loss;
    });
    // Rows 1 and 3 were read (3 twice): 1 - 0.5 * count; rows 0 and 2 keep their value.
    CHECK(chief.store(0).get("table").value.to_vector<float>() ==
          std::vector<float>{1, 1, 0.5f, 0.5f, 1, 1, 0, 0});
    CHECK(job.server.updates_applied() == 1);
  }
  CHECK_NOTHROW(job.server.join(std::chrono::seconds(5)));
}

TEST_CASE("ParameterServerStrategy: each worker's moving average is applied on the ps task") {
  OnePsJob job(2);
  {
    ParameterServerStrategy chief(job.chief, {.token = kToken});
    chief.run(step_with_statistic(2));  // on the ps: 0 * 0.5 + (2, 4) * 0.5
    CHECK(job.server.names() == std::vector<std::string>{"global_step", "moving_mean", "w"});
    CHECK(chief.store(0).get("moving_mean").value.to_vector<float>() == std::vector<float>{1, 2});
    ParameterServerStrategy worker(job.worker, {.token = kToken});
    worker.run(step_with_statistic(4));  // on the ps: (1, 2) * 0.5 + (4, 8) * 0.5
    CHECK(worker.store(0).get("moving_mean").value.to_vector<float>() ==
          std::vector<float>{2.5f, 5});
    // The chief's checkpoint reads the ps task: the worker's update is in it.
    CHECK(chief.store(0).get("moving_mean").value.to_vector<float>() == std::vector<float>{1, 2});
    chief.variable_home().before_checkpoint(chief.store(0));
    CHECK(chief.store(0).get("moving_mean").value.to_vector<float>() ==
          std::vector<float>{2.5f, 5});
  }
  CHECK_NOTHROW(job.server.join(std::chrono::seconds(5)));
}

TEST_CASE("ParameterServerStrategy: synchronous steps apply the moving averages on the ps task") {
  OnePsJob job(1);
  {
    ParameterServerStrategy chief(job.chief, {.token = kToken,
                                              .sync_replicas = SyncReplicasOptions{
                                                  .replicas_to_aggregate = 1, .num_tokens = 0}});
    chief.run(step_with_statistic(2));  // on the ps: 0 * 0.5 + (2, 4) * 0.5
    chief.run(step_with_statistic(4));  // (1, 2) * 0.5 + (4, 8) * 0.5
    CHECK(chief.store(0).get("moving_mean").value.to_vector<float>() ==
          std::vector<float>{2.5f, 5});
    CHECK(chief.store(0).get("global_step").value.item() == 2);
  }
  CHECK_NOTHROW(job.server.join(std::chrono::seconds(5)));
}

TEST_CASE("ParameterServerStrategy without ps tasks trains in this process") {
  ParameterServerStrategy local(TfConfig{}, {});
  CHECK_FALSE(local.has_parameter_servers());
  local.run([](ReplicaContext& r) { return step(r, 1.0f, false); });
  CHECK(local.store(0).get("w").value.to_vector<float>() == std::vector<float>{0.5f, 2.0f});
}

}  // namespace est::distribute
