// SyncReplicasOptions, GradientAccumulator and SyncTokenQueue: the bookkeeping of synchronous
// parameter-server training (see the header).
#include "distribute/ps/sync_replicas.h"

#include <fmt/format.h>

#include <unordered_map>

#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/indexed_slices.h"
#include "ops/math.h"
#include "ops/sparse.h"

namespace est::distribute {
namespace {

constexpr const char* kOptionsName = "sync_replicas";

}  // namespace

void SyncReplicasOptions::validate() const {
  if (replicas_to_aggregate < 1)
    throw InvalidArgumentError(fmt::format(
        "SyncReplicasOptions: replicas_to_aggregate is {}; it must be at least 1 (the number of "
        "gradients averaged into each update)",
        replicas_to_aggregate));
  if (total_num_replicas < 0)
    throw InvalidArgumentError(fmt::format(
        "SyncReplicasOptions: total_num_replicas is {}; give the number of training tasks, or 0 "
        "for replicas_to_aggregate",
        total_num_replicas));
  int needed = replicas_to_aggregate - resolved_total_num_replicas();
  if (num_tokens >= 0 && num_tokens < needed)
    throw InvalidArgumentError(fmt::format(
        "SyncReplicasOptions: too few tokens to finish the first step: num_tokens = {} but "
        "replicas_to_aggregate - total_num_replicas = {} ({} - {}); give at least {}, or -1",
        num_tokens, needed, replicas_to_aggregate, resolved_total_num_replicas(), needed));
  if (token_timeout.count() <= 0)
    throw InvalidArgumentError("SyncReplicasOptions: token_timeout must be positive");
}

NamedTensor SyncReplicasOptions::to_tensor() const {
  return {kOptionsName,
          ops::Tensor::from_vector<int64_t>({replicas_to_aggregate, resolved_total_num_replicas(),
                                             resolved_num_tokens(), token_timeout.count()})};
}

SyncReplicasOptions SyncReplicasOptions::from_tensor(const NamedTensor& tensor,
                                                     const std::string& from) {
  if (tensor.name != kOptionsName || tensor.value.dtype() != ops::DType::kI64 ||
      tensor.value.numel() != 4)
    throw DataLossError(fmt::format(
        "{} sent synchronous-training settings that are not four int64 values named '{}': the "
        "tasks run different builds of est",
        from, kOptionsName));
  std::vector<int64_t> v = tensor.value.to_vector<int64_t>();
  SyncReplicasOptions options{.replicas_to_aggregate = static_cast<int>(v[0]),
                              .total_num_replicas = static_cast<int>(v[1]),
                              .num_tokens = static_cast<int>(v[2]),
                              .token_timeout = std::chrono::milliseconds(v[3])};
  options.validate();
  return options;
}

GradientAccumulator::GradientAccumulator(int replicas_to_aggregate, int64_t global_step)
    : replicas_to_aggregate_(replicas_to_aggregate), step_(global_step) {
  if (replicas_to_aggregate < 1)
    throw InvalidArgumentError(
        fmt::format("GradientAccumulator: replicas_to_aggregate is {}; it must be at least 1",
                    replicas_to_aggregate));
}

bool GradientAccumulator::apply_grad(int64_t local_step,
                                     const std::vector<NamedTensor>& gradients) {
  if (local_step < step_) {
    ++stale_dropped_;
    return false;
  }
  ops::NoGradGuard no_grad;
  // Checked first: a refused push leaves the sums as they were.
  std::vector<NamedTensor> pushed;
  std::map<std::string, ops::Shape> shapes;
  for (const NamedTensor& g : gradients) {
    NamedTensor one{g.name, {}, {}};
    if (g.rows.defined())
      one.rows = ops::sum_duplicates(g.rows);
    else
      one.value = g.value.is_sparse() ? ops::sparse::to_dense(g.value) : g.value.detach();
    const ops::Shape& shape = one.rows.defined() ? one.rows.dense_shape : one.value.shape();
    auto known = shapes_.find(g.name);
    if (known != shapes_.end() && known->second != shape)
      throw InvalidArgumentError(fmt::format(
          "a gradient for '{}' of shape {} does not match the ones accumulated for it ({})", g.name,
          ops::shape_str(shape), ops::shape_str(known->second)));
    shapes.emplace(g.name, shape);
    pushed.push_back(std::move(one));
  }
  shapes_.merge(shapes);
  if (local_step > step_) {  // held until this accumulator reaches its step
    ahead_.emplace(local_step, std::move(pushed));
    return true;
  }
  add(std::move(pushed));
  return true;
}

void GradientAccumulator::add(std::vector<NamedTensor> pushed) {
  for (NamedTensor& g : pushed) {
    Sum& sum = sums_[g.name];
    if (g.rows.defined() && !sum.total.defined()) {
      sum.pushes.push_back(std::move(g.rows));
    } else {
      ops::Tensor dense = g.rows.defined() ? ops::to_dense(g.rows) : g.value;
      if (!sum.pushes.empty()) {  // rows so far, now a dense one: the sum turns dense
        sum.total = ops::to_dense(ops::concat_slices(sum.pushes));
        sum.pushes.clear();
      }
      sum.total = sum.total.defined() ? ops::add(sum.total, dense) : dense.clone();
    }
    ++sum.count;
  }
  ++count_;
}

NamedTensor GradientAccumulator::mean_of(const std::string& name, Sum& sum) {
  if (sum.total.defined()) {
    ops::Tensor divisor = ops::Tensor::scalar(static_cast<double>(sum.count), sum.total.dtype());
    return {name, sum.count == 1 ? sum.total : ops::div(sum.total, divisor), {}};
  }
  // Each distinct row's sum over the pushes, divided by the number of pushes that held it.
  ops::IndexedSlices total = ops::sum_duplicates(ops::concat_slices(sum.pushes));
  if (sum.pushes.size() == 1) return {name, {}, std::move(total)};
  std::unordered_map<int64_t, int> carried;
  for (const ops::IndexedSlices& push : sum.pushes)
    for (int64_t row : push.indices.to_vector<int64_t>()) ++carried[row];
  std::vector<double> counts;
  for (int64_t row : total.indices.to_vector<int64_t>())
    counts.push_back(static_cast<double>(carried.at(row)));
  ops::Shape column(total.values.shape().size(), 1);
  column[0] = static_cast<int64_t>(counts.size());
  ops::Tensor divisor = ops::cast(ops::Tensor::from_vector(counts, column), total.values.dtype());
  total.values = ops::div(total.values, divisor);
  return {name, {}, std::move(total)};
}

std::vector<NamedTensor> GradientAccumulator::take_grad() {
  if (!ready())
    throw InvalidArgumentError(
        fmt::format("GradientAccumulator::take_grad: {} of {} gradients have arrived for step {}",
                    count_, replicas_to_aggregate_, step_));
  ops::NoGradGuard no_grad;
  std::vector<NamedTensor> means;
  for (auto& [name, sum] : sums_) means.push_back(mean_of(name, sum));
  sums_.clear();
  count_ = 0;
  ++step_;
  ++steps_taken_;
  // The pushes computed at the new step that came early now count, in the order they came.
  auto [first, last] = ahead_.equal_range(step_);
  for (auto it = first; it != last; ++it) add(std::move(it->second));
  ahead_.erase(first, last);
  return means;
}

SyncTokenQueue::SyncTokenQueue(const SyncReplicasOptions& options, int64_t global_step) {
  restart(options, global_step);
}

void SyncTokenQueue::restart(const SyncReplicasOptions& options, int64_t global_step) {
  options.validate();
  options_ = options;
  global_step_ = global_step;
  arrived_.clear();
  tokens_.assign(static_cast<size_t>(options_.resolved_num_tokens()), global_step_);
}

bool SyncTokenQueue::arrive(int64_t local_step, const std::string& task) {
  if (local_step != global_step_) return false;  // a stale push: its step is already done
  arrived_.push_back(task);
  if (static_cast<int>(arrived_.size()) < options_.replicas_to_aggregate) return false;
  ++global_step_;
  arrived_.clear();
  for (int i = 0; i < options_.tokens_per_step(); ++i) tokens_.push_back(global_step_);
  return true;
}

std::optional<int64_t> SyncTokenQueue::take() {
  if (tokens_.empty()) return std::nullopt;
  int64_t token = tokens_.front();
  tokens_.pop_front();
  return token;
}

uint64_t SyncTokenQueue::wait() {
  waiters_.push_back(next_waiter_);
  return next_waiter_++;
}

std::optional<int64_t> SyncTokenQueue::take(uint64_t waiter) {
  if (waiters_.empty() || waiters_.front() != waiter) return std::nullopt;
  return take();
}

void SyncTokenQueue::leave(uint64_t waiter) { std::erase(waiters_, waiter); }

}  // namespace est::distribute
