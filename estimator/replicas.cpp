// Replicas: one store and context per replica, the parallel model_fn calls, the train ops
// with TensorFlow's loss scaling, and the reported loss.
#include "estimator/replicas.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "distribute/strategy.h"
#include "estimator/loop_util.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::detail {
namespace {

// Distinct from the seeds ModelContext derives, so replica streams do not repeat replica 0's.
constexpr uint64_t kReplicaSeedMix = 0xd1b54a32d192ed03ULL;
constexpr uint64_t kStepSeedMix = 0x8cb92ba72f3d8dd7ULL;

}  // namespace

Device default_device(const RunConfig& config) {
  std::string name = config.device;
  const char* where = "RunConfig::device";
  if (name.empty())
    if (const char* env = std::getenv("EST_DEVICE"); env && *env) {
      name = env;
      where = "the EST_DEVICE environment variable";
    }
  if (name.empty()) return Device::parse(distribute::local_devices().front());
  Device device;
  try {
    device = Device::parse(name);
  } catch (const InvalidArgumentError& error) {
    throw InvalidArgumentError(fmt::format("{} is '{}': {}", where, name, error.what()));
  }
  if (device.is_cuda() && !ops::backend_available(ops::Backend::kCuda))
    throw FailedPreconditionError(
        fmt::format("{} asks for {}, but the GPU cannot be used: {}; use /cpu:0 or leave it empty",
                    where, name, ops::backend_unavailable_reason(ops::Backend::kCuda)));
  if (device.is_cuda()) {
    std::vector<std::string> gpus = distribute::local_devices();
    if (std::find(gpus.begin(), gpus.end(), device.str()) == gpus.end())
      throw FailedPreconditionError(
          fmt::format("{} asks for {}, but this process sees only {}; use one of those", where,
                      name, fmt::join(gpus, ", ")));
  }
  return device;
}

namespace {

// TF logs where the model went once; so does this, once per process and device.
void log_placement(Device device) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::lock_guard lock(mutex);
  if (logged.insert(device.str()).second) log::info("Running the model on {}.", device.str());
}

}  // namespace

Replicas::Replicas(std::shared_ptr<distribute::Strategy> strategy, ModeKeys mode, uint64_t seed,
                   const Params& params, const RunConfig& config)
    : strategy_(std::move(strategy)), mode_(mode), seed_(seed) {
  if (strategy_) {
    set_ = strategy_->make_replicas([&](nn::VariableStore& store, int /*replica*/) {
      return std::make_unique<EstimatorContext>(store, mode, seed, params, config);
    });
  } else {
    Device device = default_device(config);
    log_placement(device);
    own_store_ = std::make_unique<nn::VariableStore>(device);
    own_context_ = std::make_unique<EstimatorContext>(*own_store_, mode, seed, params, config);
  }
  reductions_.assign(static_cast<size_t>(size()), nn::Reduction::kSumByNonzeroWeights);
  seed_replica_generators(0);
}

Replicas::~Replicas() = default;

int Replicas::size() const { return set_ ? set_->size() : 1; }

nn::VariableStore& Replicas::store() { return set_ ? set_->store(0) : *own_store_; }

std::vector<nn::VariableStore*> Replicas::stores() {
  if (set_) return set_->stores();
  return {own_store_.get()};
}

EstimatorContext& Replicas::context(int replica) {
  // The strategy made every context of the set with this class's factory.
  return set_ ? static_cast<EstimatorContext&>(set_->context(replica)) : *own_context_;
}

void Replicas::seed_replica_generators(int64_t global_step) {
  int first = strategy_ ? strategy_->worker_index() * strategy_->num_local_replicas() : 0;
  for (int r = 0; r < size(); ++r) {
    int replica = first + r;  // in the whole job: workers draw different masks too
    if (replica == 0) continue;
    uint64_t mixed = seed_ ^ (kReplicaSeedMix * static_cast<uint64_t>(replica)) ^
                     (kStepSeedMix * static_cast<uint64_t>(global_step));
    context(r).generator().set_state(ops::Generator(mixed).state());
  }
}

data::Dataset Replicas::make_dataset(const InputFn& input_fn, ModeKeys mode) const {
  if (!strategy_) return detail::make_dataset(input_fn, mode, nullptr);
  data::InputContext input_context = strategy_->input_context();
  // Evaluation runs on one task (the chief, or the evaluator) over its local replicas: it reads
  // the whole input, not a worker's shard.
  if (mode != ModeKeys::kTrain)
    input_context = {.num_input_pipelines = 1,
                     .input_pipeline_id = 0,
                     .num_replicas_in_sync = strategy_->num_local_replicas()};
  return detail::make_dataset(input_fn, mode, &input_context);
}

void Replicas::log_strategy(const char* what) const {
  if (strategy_) log::info("Using {} for {}.", strategy_->description(), what);
}

std::vector<data::Element> Replicas::next(data::Iterator& iterator) const {
  std::vector<data::Element> elements;
  elements.reserve(static_cast<size_t>(size()));
  while (elements.size() < static_cast<size_t>(size())) {
    std::optional<data::Element> element = iterator.next();
    if (!element) break;
    elements.push_back(std::move(*element));
  }
  return elements;
}

std::vector<EstimatorSpec> Replicas::call_model_fn(const ModelFn& model_fn,
                                                   const std::vector<data::Element>& elements,
                                                   ModeKeys mode, bool first) {
  std::vector<std::optional<EstimatorSpec>> results(elements.size());
  auto call = [&](int replica) {
    EstimatorContext& ctx = context(replica);
    data::Element batch =
        distribute::copy_to_device(elements[static_cast<size_t>(replica)], ctx.device());
    results[static_cast<size_t>(replica)] =
        detail::call_model_fn(model_fn, ctx, batch, mode, first && replica == 0);
    if (const Tensor& loss = results[static_cast<size_t>(replica)]->loss; loss.defined())
      reductions_[static_cast<size_t>(replica)] = nn::loss_reduction(loss);
  };
  if (strategy_) {
    int active = static_cast<int>(elements.size());
    strategy_->run(*set_, [&](distribute::ReplicaContext& replica) {
      if (replica.replica_id() < active) call(replica.replica_id());
      return Tensor();
    });
  } else {
    call(0);
  }
  std::vector<EstimatorSpec> specs;
  specs.reserve(results.size());
  for (auto& result : results) specs.push_back(std::move(*result));
  return specs;
}

void Replicas::run_train_ops(const std::vector<EstimatorSpec>& specs, EstimatorSpec* spec) {
  if (!strategy_) {
    specs.front().train_op.run();
    return;
  }
  if (specs.size() != static_cast<size_t>(size()))
    throw InternalError(
        fmt::format("run_train_ops: {} specs for {} replicas", specs.size(), size()));
  const int replicas = strategy_->num_replicas_in_sync();
  bool job_loss = spec && strategy_->num_workers() > 1;
  Tensor loss_sum;  // replica 0's copy of the sum over the job
  strategy_->run(*set_, [&](distribute::ReplicaContext& replica) {
    auto r = static_cast<size_t>(replica.replica_id());
    // TF1's loss scaling, decided by the gradient path from the train op's loss reduction.
    double scale = distribute::loss_reduction_scale(specs[r].train_op.loss_reduction(), replicas);
    Tensor sum;
    replica.run_train_op(specs[r].train_op, scale, &context(replica.replica_id()),
                         job_loss ? &sum : nullptr);
    if (job_loss && r == 0) loss_sum = sum;
    return Tensor();
  });
  if (job_loss) {
    // As step_spec: the mean over replicas when the gradients were divided, else the sum.
    double total = loss_sum.item();
    if (scales_loss(specs.front().train_op) && nn::is_mean_reduction(reductions_.front()))
      total /= static_cast<double>(replicas);
    spec->loss = Tensor::scalar(total, spec->loss.dtype());
  }
}

bool Replicas::scales_loss(const nn::TrainOp& train_op) const {
  return strategy_ && train_op.defined() &&
         distribute::loss_reduction_scale(train_op.loss_reduction(),
                                          strategy_->num_replicas_in_sync()) != 1.0;
}

EstimatorSpec Replicas::step_spec(const std::vector<EstimatorSpec>& specs) const {
  EstimatorSpec spec = specs.front();
  if (specs.size() == 1) return spec;
  ops::NoGradGuard no_grad;
  double total = 0;
  for (const EstimatorSpec& replica_spec : specs) total += replica_spec.loss.item();
  bool mean = mode_ == ModeKeys::kEval ||
              (scales_loss(spec.train_op) && nn::is_mean_reduction(reductions_.front()));
  if (mean) total /= static_cast<double>(specs.size());
  spec.loss = Tensor::scalar(total, spec.loss.dtype());
  return spec;
}

}  // namespace est::detail
