// The Batcher's queues, the leader's wait, and splitting a batch's outputs (see batcher.h).
#include "export/batcher.h"

#include <algorithm>
#include <exception>

#include "ops/array_ops.h"

namespace est::serving {

struct Batcher::Request {
  NamedTensors inputs;
  int64_t rows = 0;
  bool done = false;
  NamedTensors outputs;
  std::exception_ptr error;
};

struct Batcher::Queue {
  std::vector<std::shared_ptr<Request>> waiting;
  int64_t rows = 0;
  bool leader_waiting = false;
  std::condition_variable changed;  // a request joined, or a batch finished
};

namespace {

int64_t rows_of(const NamedTensors& inputs) {
  for (const auto& [name, tensor] : inputs)
    if (tensor.rank() > 0) return tensor.dim(0);
  return 0;
}

// Rows of tensors one after another (axis 0); strings, which est's kernels do not copy, on
// the host.
Tensor concat_rows(const std::vector<Tensor>& parts) {
  if (parts.front().dtype() != DType::kString) return ops::concat(parts, 0);
  std::vector<std::string> values;
  Shape shape = parts.front().shape();
  shape[0] = 0;
  for (const Tensor& part : parts) {
    const std::vector<std::string> strings = part.to_vector<std::string>();
    values.insert(values.end(), strings.begin(), strings.end());
    shape[0] += part.dim(0);
  }
  return Tensor::from_vector<std::string>(values, shape);
}

// Rows [begin, begin + rows) of `tensor`.
Tensor slice_rows(const Tensor& tensor, int64_t begin, int64_t rows) {
  std::vector<int64_t> start(static_cast<size_t>(tensor.rank()), 0);
  Shape size = tensor.shape();
  start[0] = begin;
  size[0] = rows;
  if (tensor.dtype() != DType::kString) return ops::slice(tensor, start, size);
  const std::vector<std::string> strings = tensor.to_vector<std::string>();
  const int64_t row = tensor.numel() / std::max<int64_t>(tensor.dim(0), 1);
  return Tensor::from_vector<std::string>(
      {strings.begin() + begin * row, strings.begin() + (begin + rows) * row}, size);
}

}  // namespace

Batcher::Batcher(Options options) : options_(options) {
  if (options_.max_batch_size < 1)
    throw InvalidArgumentError("Batcher: max_batch_size must be at least 1");
}

int64_t Batcher::batches_run() const {
  std::lock_guard lock(mutex_);
  return batches_run_;
}

void Batcher::run_batch(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn) {
  auto run_alone = [&](Request& request) {
    try {
      request.outputs = fn(request.inputs);
    } catch (...) {
      request.error = std::current_exception();
    }
  };
  if (batch.size() == 1) {
    run_alone(*batch.front());
    return;
  }
  try {
    NamedTensors inputs;
    int64_t total = 0;
    for (const auto& request : batch) total += request->rows;
    for (const auto& [name, first] : batch.front()->inputs) {
      std::vector<Tensor> parts;
      for (const auto& request : batch) parts.push_back(request->inputs.at(name));
      inputs[name] = concat_rows(parts);
    }
    NamedTensors outputs = fn(inputs);
    bool splittable = true;
    for (const auto& [name, tensor] : outputs)
      splittable = splittable && tensor.rank() > 0 && tensor.dim(0) == total;
    if (!splittable) {
      for (const auto& request : batch) run_alone(*request);
      return;
    }
    int64_t begin = 0;
    for (const auto& request : batch) {
      for (const auto& [name, tensor] : outputs)
        request->outputs[name] = slice_rows(tensor, begin, request->rows);
      begin += request->rows;
    }
  } catch (...) {
    for (const auto& request : batch) request->error = std::current_exception();
  }
}

NamedTensors Batcher::run(const std::string& key, const NamedTensors& inputs, const RunFn& fn) {
  auto request = std::make_shared<Request>();
  request->inputs = inputs;
  request->rows = rows_of(inputs);
  if (request->rows == 0 || request->rows >= options_.max_batch_size) {
    {
      std::lock_guard lock(mutex_);
      ++batches_run_;
    }
    return fn(inputs);
  }
  std::unique_lock lock(mutex_);
  std::shared_ptr<Queue>& slot = queues_[key];
  if (!slot) slot = std::make_shared<Queue>();
  std::shared_ptr<Queue> queue = slot;
  if (queue->rows + request->rows > options_.max_batch_size) {
    // This request would overflow the batch being gathered: wake its leader, wait for it.
    queue->changed.notify_all();
    queue->changed.wait(lock, [&] { return queue->waiting.empty(); });
  }
  queue->waiting.push_back(request);
  queue->rows += request->rows;
  queue->changed.notify_all();
  if (!queue->leader_waiting) {
    // The leader: gather until the batch is full or the timeout passes, then run it.
    queue->leader_waiting = true;
    const auto deadline = std::chrono::steady_clock::now() + options_.batch_timeout;
    queue->changed.wait_until(lock, deadline,
                              [&] { return queue->rows >= options_.max_batch_size; });
    std::vector<std::shared_ptr<Request>> batch;
    batch.swap(queue->waiting);
    queue->rows = 0;
    queue->leader_waiting = false;
    ++batches_run_;
    queue->changed.notify_all();  // requests that waited for room may queue now
    lock.unlock();
    run_batch(batch, fn);
    lock.lock();
    for (const auto& member : batch) member->done = true;
    queue->changed.notify_all();
  } else {
    queue->changed.wait(lock, [&] { return request->done; });
  }
  if (request->error) std::rethrow_exception(request->error);
  return std::move(request->outputs);
}

}  // namespace est::serving
