// CollectiveAllReduce: packing, the ring all-reduce of each pack, broadcast and all-gather.
#include "distribute/collectives/collective_all_reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/net/ring.h"
#include "distribute/net/step_profile.h"
#include "ops/backend.h"
#include "ops/error.h"

namespace est::distribute {

CommunicationImplementation resolve_communication(CommunicationImplementation requested,
                                                  const std::vector<ops::Device>& devices) {
  bool gpus = !devices.empty();
  for (const ops::Device& device : devices) gpus = gpus && device.is_cuda();
  if (requested == CommunicationImplementation::kNccl && !gpus) {
    std::string names;
    for (const ops::Device& device : devices) names += (names.empty() ? "" : ", ") + device.str();
    std::string reason = ops::backend_unavailable_reason(ops::Backend::kCuda);
    throw FailedPreconditionError(fmt::format(
        "MultiWorkerMirroredStrategy: communication NCCL needs a GPU on every worker, but this "
        "worker's devices are ({}){}; use CommunicationImplementation::kRing or kAuto, or run "
        "on a machine with a GPU",
        names, reason.empty() ? "" : " and no GPU can be used: " + reason));
  }
  // AUTO (TensorFlow's rule): NCCL when every local device is a GPU and the build has CUDA.
  if (requested == CommunicationImplementation::kAuto)
    return gpus && EST_HAVE_CUDA ? CommunicationImplementation::kNccl
                                 : CommunicationImplementation::kRing;
  return requested;
}

std::string_view communication_name(CommunicationImplementation implementation) {
  switch (implementation) {
    case CommunicationImplementation::kAuto: return "AUTO";
    case CommunicationImplementation::kRing: return "RING";
    case CommunicationImplementation::kNccl: return "NCCL";
  }
  return "?";
}

CollectiveAllReduce::CollectiveAllReduce(std::shared_ptr<ClusterRuntime> runtime,
                                         CommunicationOptions options,
                                         std::shared_ptr<CrossDeviceOps> local)
    : runtime_(std::move(runtime)),
      options_(options),
      local_(local ? std::move(local) : std::make_shared<ReductionToOneDevice>()) {
  if (options_.bytes_per_pack < 0)
    throw InvalidArgumentError(fmt::format(
        "CommunicationOptions: bytes_per_pack must be >= 0 (0: automatic), got {}",
        options_.bytes_per_pack));
  if (options_.bytes_per_pack == 0) options_.bytes_per_pack = kDefaultBytesPerPack;
  if (options_.timeout_seconds && *options_.timeout_seconds <= 0)
    throw InvalidArgumentError(fmt::format(
        "CommunicationOptions: timeout_seconds must be positive, got {}", *options_.timeout_seconds));
  if (runtime_ && options_.timeout_seconds)
    runtime_->ring().set_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(*options_.timeout_seconds)));
}

void CollectiveAllReduce::check_devices(const std::vector<ops::Device>& devices) const {
  local_->check_devices(devices);
}

void CollectiveAllReduce::reduce_slice(const std::vector<double>& factors,
                                       const std::vector<std::vector<ops::Tensor>*>& inputs,
                                       const std::vector<std::vector<ops::Tensor>*>& outputs,
                                       int slice, int num_slices) const {
  local_->reduce_slice(factors, inputs, outputs, slice, num_slices);
}

int CollectiveAllReduce::num_workers() const { return runtime_ ? runtime_->world() : 1; }
int CollectiveAllReduce::worker_index() const { return runtime_ ? runtime_->rank() : 0; }

void CollectiveAllReduce::reduce_across_workers(std::vector<ops::Tensor>& sums,
                                                const std::string& what) {
  if (num_workers() == 1) return;
  std::vector<ops::Tensor*> tensors;
  for (ops::Tensor& t : sums)
    if (t.defined()) tensors.push_back(&t);
  sum_in_place(tensors, pack_, what);
}

namespace {

// Whether two of `spans` (pointer, elements of `element` bytes) share memory.
bool overlapping(std::vector<std::pair<void*, size_t>> spans, size_t element) {
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (static_cast<char*>(spans[i - 1].first) + spans[i - 1].second * element >
        static_cast<char*>(spans[i].first))
      return true;
  return false;
}

}  // namespace

namespace {

// Throws unless every tensor listed (null: skipped) is float32 or float64.
void check_summable(const std::vector<const ops::Tensor*>& tensors) {
  for (const ops::Tensor* t : tensors)
    if (t && t->dtype() != ops::DType::kF32 && t->dtype() != ops::DType::kF64)
      throw InvalidArgumentError(fmt::format(
          "all-reduce: a {} tensor cannot be summed across workers; only float32 and float64",
          dtype_name(t->dtype())));
}

// Cuts the tensors listed (null: skipped) into packs of one dtype, float32 first, and of at
// most `limit` bytes (a larger tensor travels alone), in their order; calls
// pack(dtype, indices, bytes) for each.
template <class Pack>
void for_each_pack(const std::vector<const ops::Tensor*>& tensors, size_t limit, Pack&& pack) {
  for (ops::DType dtype : {ops::DType::kF32, ops::DType::kF64}) {
    std::vector<size_t> indices;  // tensors waiting for the current pack
    size_t bytes = 0;
    auto flush = [&] {
      if (!indices.empty()) pack(dtype, indices, bytes);
      indices.clear();
      bytes = 0;
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
      const ops::Tensor* t = tensors[i];
      if (!t || t->dtype() != dtype) continue;
      if (!indices.empty() && bytes + t->nbytes() > limit) flush();
      indices.push_back(i);
      bytes += t->nbytes();
    }
    flush();
  }
}

}  // namespace

void CollectiveAllReduce::sum_in_place(std::vector<ops::Tensor*>& tensors,
                                       std::vector<char>& pack_buffer, const std::string& what) {
  std::vector<const ops::Tensor*> listed(tensors.begin(), tensors.end());
  check_summable(listed);
  auto pack_limit = static_cast<size_t>(options_.bytes_per_pack);
  for_each_pack(
      listed, pack_limit,
      [&](ops::DType dtype, const std::vector<size_t>& pack, size_t pack_bytes) {
        std::vector<std::pair<void*, size_t>> spans;
        for (size_t i : pack)
          spans.emplace_back(tensors[i]->raw_data(), static_cast<size_t>(tensors[i]->numel()));
        if (!overlapping(spans, ops::dtype_size(dtype))) {
          // Summed where they are, as one concatenation: the bytes and sums of a copied pack.
          runtime_->ring().all_reduce_sum(spans, dtype, what);
          return;
        }
        // Tensors that share memory each get their own sum, through a copy.
        pack_buffer.resize(pack_bytes);
        size_t offset = 0;
        for (size_t i : pack) {
          std::memcpy(pack_buffer.data() + offset, tensors[i]->raw_data(), tensors[i]->nbytes());
          offset += tensors[i]->nbytes();
        }
        runtime_->ring().all_reduce_sum(pack_buffer.data(), pack_bytes / ops::dtype_size(dtype),
                                        dtype, what);
        offset = 0;
        for (size_t i : pack) {
          std::memcpy(tensors[i]->raw_data(), pack_buffer.data() + offset, tensors[i]->nbytes());
          offset += tensors[i]->nbytes();
        }
      });
}

std::vector<ops::Tensor> CollectiveAllReduce::sum_scaled(const std::vector<ops::Tensor>& inputs,
                                                         const std::vector<double>& factors,
                                                         const std::string& what) {
  std::vector<const ops::Tensor*> listed;
  for (const ops::Tensor& in : inputs) listed.push_back(in.defined() ? &in : nullptr);
  check_summable(listed);
  std::vector<ops::Tensor> sums(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) sums[i] = ops::Tensor::empty(inputs[i].shape(), inputs[i].dtype());
  auto pack_limit = static_cast<size_t>(options_.bytes_per_pack);
  for_each_pack(listed, pack_limit,
                [&](ops::DType dtype, const std::vector<size_t>& pack, size_t /*pack_bytes*/) {
                  // The outs are fresh, so they overlap nothing; inputs that share memory are only
                  // read.
                  std::vector<Ring::ScaledSpan> spans;
                  for (size_t i : pack)
                    spans.push_back({inputs[i].raw_data(), sums[i].raw_data(),
                                     static_cast<size_t>(inputs[i].numel()), factors[i]});
                  runtime_->ring().all_reduce_scaled(spans, dtype, what);
                });
  return sums;
}

void CollectiveAllReduce::reduce_scaled_across_workers(std::vector<ops::Tensor>& tensors,
                                                       const std::vector<double>& factors,
                                                       const std::string& what) {
  if (num_workers() == 1) {
    CrossDeviceOps::reduce_scaled_across_workers(tensors, factors, what);
    return;
  }
  tensors = sum_scaled(tensors, factors, what);
}

// One background reduction: its inputs and factors, then its sums or its error.
struct CollectiveAllReduce::Job {
  std::vector<ops::Tensor> inputs;
  std::vector<double> factors;
  std::string what;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::vector<ops::Tensor> sums;
  std::exception_ptr error;
};

namespace {

class BackgroundReduction : public PendingReduction {
 public:
  explicit BackgroundReduction(std::shared_ptr<CollectiveAllReduce::Job> job)
      : job_(std::move(job)) {}
  std::vector<ops::Tensor> wait() override;

 private:
  std::shared_ptr<CollectiveAllReduce::Job> job_;
};

}  // namespace

std::vector<ops::Tensor> BackgroundReduction::wait() {
  std::unique_lock lock(job_->mutex);
  job_->done_cv.wait(lock, [&] { return job_->done; });
  if (job_->error) std::rethrow_exception(job_->error);
  return std::move(job_->sums);
}

std::unique_ptr<PendingReduction> CollectiveAllReduce::start_reduce(std::vector<ops::Tensor> inputs,
                                                                    std::vector<double> factors,
                                                                    std::string what) {
  if (num_workers() == 1) return CrossDeviceOps::start_reduce(inputs, factors, what);
  auto job = std::make_shared<Job>();
  job->inputs = std::move(inputs);
  job->factors = std::move(factors);
  job->what = std::move(what);
  {
    std::lock_guard lock(mutex_);
    if (!communication_.joinable()) communication_ = std::thread([this] { communication_loop(); });
    jobs_.push_back(job);
  }
  work_cv_.notify_one();
  return std::make_unique<BackgroundReduction>(job);
}

void CollectiveAllReduce::communication_loop() {
  step_profile::note_thread("collective");
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping
      job = jobs_.front();
      jobs_.pop_front();
    }
    try {
      // Fresh sums: the inputs (a step's gradients) are only read.
      std::vector<ops::Tensor> sums = sum_scaled(job->inputs, job->factors, job->what);
      std::lock_guard lock(job->mutex);
      job->sums = std::move(sums);
      job->done = true;
    } catch (...) {
      std::lock_guard lock(job->mutex);
      job->error = std::current_exception();
      job->done = true;
    }
    job->done_cv.notify_all();
  }
}

CollectiveAllReduce::~CollectiveAllReduce() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (communication_.joinable()) communication_.join();
}

void CollectiveAllReduce::broadcast_from_chief(std::vector<ops::Tensor>& values,
                                               const std::string& what) {
  if (num_workers() == 1) return;
  size_t total = 0;
  for (const ops::Tensor& t : values)
    if (t.defined()) total += t.nbytes();
  pack_.resize(total);
  size_t offset = 0;
  for (const ops::Tensor& t : values)
    if (t.defined()) {
      std::memcpy(pack_.data() + offset, t.raw_data(), t.nbytes());
      offset += t.nbytes();
    }
  runtime_->ring().broadcast(pack_.data(), total, 0, what);
  offset = 0;
  for (ops::Tensor& t : values)
    if (t.defined()) {
      std::memcpy(t.raw_data(), pack_.data() + offset, t.nbytes());
      offset += t.nbytes();
    }
}

std::vector<std::string> CollectiveAllReduce::all_gather_across_workers(const std::string& mine,
                                                                         const std::string& what) {
  if (num_workers() == 1) return {mine};
  return runtime_->ring().all_gather(mine, what);
}

}  // namespace est::distribute
