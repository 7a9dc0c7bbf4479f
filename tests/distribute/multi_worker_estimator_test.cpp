// The Estimator's multi-worker loop (estimator/training_session.h with estimator/worker_sync.h)
// on worker threads of this process: where every worker's input stands in the chief's last
// checkpoint when a hook stops training. The workers agree on a stop at the step after the
// request; the position saved must be the one after the last trained batch, not after a batch
// read for a step that never ran (on the worker whose hook asked, and on the others, which
// learn of it only in the agreement), so that a resumed job trains as an uninterrupted one.
#include <doctest/doctest.h>

#include <array>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "distribute/distribute.h"
#include "estimator/estimator.h"
#include "nn/nn.h"
#include "tests/command.h"
#include "tests/distribute/two_workers.h"

using namespace est;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kPerWorkerBatch = 2;
constexpr int64_t kStopAfter = 3;  // steps

// Example i has x = i: the first feature of a batch tells where the input stands.
InputFn counting_input() {
  return [](ModeKeys, const InputContext* ctx) {
    std::vector<float> x(64);
    std::vector<int64_t> y(64);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i);
      y[i] = static_cast<int64_t>(i % 3);
    }
    data::Dataset ds = data::Dataset::from_tensor_slices(
        {{"x", Tensor::from_vector<float>(x, {64, 1})}}, Tensor::from_vector<int64_t>(y));
    if (ctx) ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id);
    return ds.batch(kPerWorkerBatch);
  };
}

EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys,
                       ModelContext& ctx) {
  Tensor logits = nn::dense(ctx, features.at("x"), {.units = 3});
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  return EstimatorSpec::train(loss, optim::sgd(0.01).minimize(loss, ctx));
}

// Asks to stop once kStopAfter steps have run (as a loss-threshold hook on the all-reduced
// loss would, on every worker; or a hook on one worker only).
class StopAfter : public SessionRunHook {
 public:
  void after_run(SessionRunContext& context, const SessionRunValues&) override {
    if (context.global_step() + 1 >= kStopAfter) context.request_stop();
  }
};

// Two workers (threads of this process) train on model_dir `dir` until `max_steps` or a stop;
// worker w gets hooks[w]. Worker 0 is the chief.
void run_job(const std::string& dir, const std::array<Hooks, 2>& hooks,
             std::optional<int64_t> max_steps = std::nullopt) {
  RunConfig config{.model_dir = dir,
                   .tf_random_seed = 5,
                   .save_summary_steps = 0,
                   .save_checkpoints_steps = 1000,
                   .save_checkpoints_secs = std::nullopt,
                   .log_step_count_steps = 1000};
  testing::train_on_two_workers(
      {.token = "multi-worker-estimator-test-0123", .heartbeat_timeout = 3000ms, .bound = 120s},
      config, [&](const RunConfig& worker_config, int w) {
        Estimator estimator(model_fn, worker_config);
        estimator.train(counting_input(),
                        {.hooks = hooks[static_cast<size_t>(w)], .max_steps = max_steps});
      });
}

// Each worker's position in the chief's last checkpoint is the one after kStopAfter batches.
void check_positions_after_stop(const std::string& dir) {
  checkpoint::TensorBundle saved = checkpoint::load(dir);
  CHECK(saved.global_step == kStopAfter);
  for (int w = 0; w < 2; ++w) {
    CAPTURE(w);
    const checkpoint::Blob* position = saved.find_blob("iterator/worker_" + std::to_string(w));
    REQUIRE(position != nullptr);
    InputContext context{
        .num_input_pipelines = 2, .input_pipeline_id = w, .num_replicas_in_sync = 2};
    data::Iterator resumed = counting_input()(ModeKeys::kTrain, &context).iterator();
    resumed.restore_state(position->bytes);
    std::optional<data::Element> next = resumed.next();
    REQUIRE(next.has_value());
    // Worker w's shard is w, w + 2, w + 4, ...; after kStopAfter batches of 2 it stands at
    // example kStopAfter * 2 of its shard.
    CHECK(next->features.at("x").to_vector<double>().front() ==
          static_cast<double>(w + 2 * kPerWorkerBatch * kStopAfter));
  }
}

}  // namespace

TEST_CASE(
    "multi-worker Estimator: a hook's stop saves every worker's position after its last step") {
  testing::ScratchDir dir;
  Hooks stop{std::make_shared<StopAfter>()};
  run_job(dir.str(), {stop, stop});
  check_positions_after_stop(dir.str());
}

// Worker 0 learns of worker 1's request only in the agreement, after it has read the batch
// of the step that does not run: that batch is not consumed.
TEST_CASE(
    "multi-worker Estimator: another worker's stop saves this worker's position after its last "
    "step, and the job resumes as if never stopped") {
  testing::ScratchDir stopped;
  run_job(stopped.str(), {Hooks{}, Hooks{std::make_shared<StopAfter>()}});
  check_positions_after_stop(stopped.str());

  constexpr int64_t kMaxSteps = 7;
  run_job(stopped.str(), {Hooks{}, Hooks{}}, kMaxSteps);
  testing::ScratchDir straight;
  run_job(straight.str(), {Hooks{}, Hooks{}}, kMaxSteps);
  checkpoint::TensorBundle resumed = checkpoint::load(stopped.str());
  checkpoint::TensorBundle uninterrupted = checkpoint::load(straight.str());
  REQUIRE(resumed.global_step == kMaxSteps);
  REQUIRE(uninterrupted.global_step == kMaxSteps);
  REQUIRE(resumed.tensors.size() == uninterrupted.tensors.size());
  for (const checkpoint::TensorEntry& entry : uninterrupted.tensors) {
    CAPTURE(entry.name);
    const checkpoint::TensorEntry* other = resumed.find(entry.name);
    REQUIRE(other != nullptr);
    // Bitwise: the same batches in the same order give the same float operations.
    CHECK(other->value.to_vector<double>() == entry.value.to_vector<double>());
  }
  for (const checkpoint::Blob& blob : uninterrupted.blobs) {
    CAPTURE(blob.name);
    const checkpoint::Blob* other = resumed.find_blob(blob.name);
    REQUIRE(other != nullptr);
    CHECK(other->bytes == blob.bytes);
  }
}
