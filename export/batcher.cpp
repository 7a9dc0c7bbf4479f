// The Batcher's queues, the leader's wait, and splitting a batch's outputs (see batcher.h).
#include "export/batcher.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "export/serving_metrics.h"
#include "ops/array_ops.h"
#include "ops/math.h"

namespace est::serving {

struct Batcher::Request {
  NamedTensors inputs;
  int64_t rows = 0;
  int64_t enqueued_at = 0;  // microseconds, for the queuing latency
  bool done = false;
  NamedTensors outputs;
  std::exception_ptr error;
  DoneFn on_done;  // run_async()'s completion; empty for run()'s requests, which wait on `done`
};

struct Batcher::Queue {
  std::vector<std::shared_ptr<Request>> waiting;
  int64_t rows = 0;
  bool leader_waiting = false;
  int64_t enqueued = 0;             // batches forming or waiting for a thread
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

// `tensor` padded at the end of each dimension after the first to `dims` with its first element
// (zeros when it has none), as TF's batching_util.cc AddPadding.
Tensor pad_to(const Tensor& tensor, const Shape& dims) {
  Tensor out = tensor;
  const size_t rank = tensor.shape().size();
  for (size_t axis = 1; axis < rank; ++axis) {
    if (out.dim(static_cast<int>(axis)) == dims[axis]) continue;
    Shape pad_shape = out.shape();
    pad_shape[axis] = dims[axis] - pad_shape[axis];
    const Tensor first = tensor.numel() > 0 ? ops::slice(tensor, std::vector<int64_t>(rank, 0),
                                                         std::vector<int64_t>(rank, 1))
                                            : Tensor::zeros(Shape(rank, 1), tensor.dtype());
    out = ops::concat({out, ops::broadcast_to(first, pad_shape)}, static_cast<int>(axis));
  }
  return out;
}

// Every part padded to the largest size of each dimension after the first among them.
void pad_parts(std::vector<Tensor>& parts) {
  Shape dims = parts.front().shape();
  for (const Tensor& part : parts)
    for (size_t axis = 1; axis < dims.size(); ++axis)
      dims[axis] = std::max(dims[axis], part.shape()[axis]);
  for (Tensor& part : parts) part = pad_to(part, dims);
}

// The smallest allowed batch size that holds `rows` (`rows` when none does or none are given).
int64_t padded_size(const std::vector<int64_t>& allowed, int64_t rows) {
  for (const int64_t size : allowed)
    if (size >= rows) return size;
  return rows;
}

// TF's SharedBatchScheduler's refusal of a request that would start one batch too many.
UnavailableError queue_full(int64_t max_enqueued_batches) {
  return UnavailableError(
      fmt::format("The batch scheduling queue to which this task was submitted is full (its "
                  "max_enqueued_batches is {})",
                  max_enqueued_batches));
}

}  // namespace

Batcher::Batcher(Options options) : options_(std::move(options)) {
  if (options_.max_batch_size < 1)
    throw InvalidArgumentError(
        fmt::format("max_batch_size must be at least 1, not {}", options_.max_batch_size));
  const std::vector<int64_t>& allowed = options_.allowed_batch_sizes;
  for (size_t i = 0; i < allowed.size(); ++i)
    if (allowed[i] < 1 || (i > 0 && allowed[i] <= allowed[i - 1]))
      throw InvalidArgumentError(fmt::format(
          "allowed_batch_sizes entries must be positive and monotonically increasing: {}",
          fmt::join(allowed, ", ")));
  if (!allowed.empty() && allowed.back() != options_.max_batch_size)
    throw InvalidArgumentError(fmt::format(
        "Last entry in allowed_batch_sizes must match max_batch_size; last entry was {}; "
        "expected {}",
        allowed.back(), options_.max_batch_size));
  if (options_.max_execution_batch_size < 0)
    throw InvalidArgumentError(fmt::format("max_execution_batch_size must be positive; was {}",
                                           options_.max_execution_batch_size));
  if (options_.enable_large_batch_splitting &&
      options_.max_execution_batch_size > options_.max_batch_size)
    throw InvalidArgumentError(fmt::format(
        "When enable_large_batch_splitting is true, input_batch_size_limit must be greater than "
        "or equal to max_execution_batch_size (max_batch_size is {}, max_execution_batch_size {})",
        options_.max_batch_size, options_.max_execution_batch_size));
}

int64_t Batcher::batch_limit() const {
  return options_.enable_large_batch_splitting && options_.max_execution_batch_size > 0
             ? options_.max_execution_batch_size
             : options_.max_batch_size;
}

std::string Batcher::rows_key(const NamedTensors& inputs) const {
  std::string key;
  for (const auto& [name, tensor] : inputs) {
    if (options_.pad_variable_length_inputs && tensor.dtype() != DType::kString) {
      key += fmt::format("/{}:{}[rank {}]", name, dtype_name(tensor.dtype()), tensor.rank());
      continue;
    }
    Shape row(tensor.shape().begin() + (tensor.rank() > 0 ? 1 : 0), tensor.shape().end());
    key += fmt::format("/{}:{}{}", name, dtype_name(tensor.dtype()), ops::shape_str(row));
  }
  return key;
}

int64_t Batcher::batches_run() const {
  std::lock_guard lock(mutex_);
  return batches_run_;
}

int64_t Batcher::batches_enqueued() const {
  std::lock_guard lock(mutex_);
  int64_t enqueued = 0;
  for (const auto& [key, queue] : queues_) enqueued += queue->enqueued;
  return enqueued;
}

void Batcher::run_on_thread(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn,
                            std::unique_lock<std::mutex>& lock, Queue* queue) {
  thread_freed_.wait(lock, [&] {
    return options_.num_batch_threads <= 0 || batches_running_ < options_.num_batch_threads;
  });
  if (queue) --queue->enqueued;
  ++batches_running_;
  ++batches_run_;
  lock.unlock();
  const int64_t start = now_micros();
  for (const auto& request : batch)
    record_batch_request(options_.thread_pool_name, start - request->enqueued_at);
  run_batch(batch, fn);
  lock.lock();
  --batches_running_;
  thread_freed_.notify_all();
}

void Batcher::run_batch(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn) {
  auto run_alone = [&](Request& request) {
    try {
      request.outputs = fn(request.inputs);
    } catch (...) {
      request.error = std::current_exception();
    }
  };
  int64_t total = 0;
  for (const auto& request : batch) total += request->rows;
  const int64_t padded = padded_size(options_.allowed_batch_sizes, total);
  record_batch(total, padded);
  if (batch.size() == 1 && padded == total) {
    run_alone(*batch.front());
    return;
  }
  try {
    NamedTensors inputs;
    for (const auto& [name, first] : batch.front()->inputs) {
      std::vector<Tensor> parts;
      for (const auto& request : batch) parts.push_back(request->inputs.at(name));
      if (options_.pad_variable_length_inputs && first.dtype() != DType::kString) pad_parts(parts);
      if (padded > total) {
        const Tensor row = slice_rows(parts.back(), 0, 1);
        parts.insert(parts.end(), static_cast<size_t>(padded - total), row);
      }
      inputs[name] = concat_rows(parts);
    }
    NamedTensors outputs = fn(inputs);
    bool splittable = true;
    for (const auto& [name, tensor] : outputs)
      splittable = splittable && tensor.rank() > 0 && tensor.dim(0) == padded;
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
  const int64_t rows = rows_of(inputs);
  if (rows > options_.max_batch_size)
    throw InvalidArgumentError(fmt::format(
        "Task size {} is larger than maximum input batch size {}", rows, options_.max_batch_size));
  if (!options_.enable_large_batch_splitting) return run_request(key, inputs, rows, fn);
  const int64_t limit = batch_limit();
  int64_t room = limit;  // in the batch being gathered
  {
    std::lock_guard lock(mutex_);
    if (auto found = queues_.find(key); found != queues_.end() && found->second->leader_waiting)
      room = std::max<int64_t>(0, limit - found->second->rows);
  }
  if (rows <= room) return run_request(key, inputs, rows, fn);
  // TF's InputSplitMetadata: the room left in the batch being gathered, then full batches, then
  // the rest.
  std::vector<int64_t> sizes;
  int64_t left = rows;
  if (room > 0) {
    sizes.push_back(room);
    left -= room;
  }
  for (; left > 0; left -= sizes.back()) sizes.push_back(std::min(left, limit));
  return run_split(key, inputs, sizes, fn);
}

NamedTensors Batcher::run_split(const std::string& key, const NamedTensors& inputs,
                                const std::vector<int64_t>& sizes, const RunFn& fn) {
  std::vector<NamedTensors> parts;
  int64_t begin = 0;
  for (const int64_t size : sizes) {
    NamedTensors part;
    for (const auto& [name, tensor] : inputs) part[name] = slice_rows(tensor, begin, size);
    parts.push_back(run_request(key, part, size, fn));
    begin += size;
  }
  NamedTensors outputs;
  for (const auto& [name, first] : parts.front()) {
    std::vector<Tensor> pieces;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Tensor& piece = parts[i].at(name);
      if (piece.rank() == 0 || piece.dim(0) != sizes[i]) {
        // Outputs not per row (a model reducing over its batch): the request runs whole.
        return run_own_batch(std::make_shared<Request>(Request{
                                 .inputs = inputs, .rows = begin, .enqueued_at = now_micros()}),
                             fn);
      }
      pieces.push_back(piece);
    }
    outputs[name] = concat_rows(pieces);
  }
  return outputs;
}

NamedTensors Batcher::run_own_batch(const std::shared_ptr<Request>& request, const RunFn& fn) {
  std::unique_lock lock(mutex_);
  run_on_thread({request}, fn, lock, nullptr);
  lock.unlock();
  if (request->error) std::rethrow_exception(request->error);
  return std::move(request->outputs);
}

NamedTensors Batcher::run_request(const std::string& key, const NamedTensors& inputs, int64_t rows,
                                  const RunFn& fn) {
  auto request = std::make_shared<Request>(
      Request{.inputs = inputs, .rows = rows, .enqueued_at = now_micros()});
  const int64_t limit = batch_limit();
  if (rows == 0 || rows >= limit) return run_own_batch(request, fn);
  std::unique_lock lock(mutex_);
  std::shared_ptr<Queue> queue = queue_locked(key);
  if (queue->rows + request->rows > limit) {
    // This request would overflow the batch being gathered: wake its leader, wait for it.
    queue->changed.notify_all();
    queue->changed.wait(lock, [&] { return queue->waiting.empty(); });
  }
  switch (join_locked(*queue, request)) {
    case Joined::kFull:
      throw queue_full(options_.max_enqueued_batches);
    case Joined::kLeader:
      // Gather until the batch is full or the timeout passes, then run it.
      lead(*queue, std::chrono::steady_clock::now() + options_.batch_timeout, fn, lock);
      break;
    case Joined::kMember:
      queue->changed.wait(lock, [&] { return request->done; });
      break;
  }
  if (request->error) std::rethrow_exception(request->error);
  return std::move(request->outputs);
}

std::shared_ptr<Batcher::Queue> Batcher::queue_locked(const std::string& key) {
  std::shared_ptr<Queue>& slot = queues_[key];
  if (!slot) slot = std::make_shared<Queue>();
  return slot;
}

Batcher::Joined Batcher::join_locked(Queue& queue, const std::shared_ptr<Request>& request) {
  if (!queue.leader_waiting && options_.max_enqueued_batches > 0 &&
      queue.enqueued >= options_.max_enqueued_batches)
    return Joined::kFull;
  queue.waiting.push_back(request);
  queue.rows += request->rows;
  queue.changed.notify_all();
  if (queue.leader_waiting) return Joined::kMember;
  queue.leader_waiting = true;
  ++queue.enqueued;
  return Joined::kLeader;
}

void Batcher::lead(Queue& queue, std::chrono::steady_clock::time_point deadline, const RunFn& fn,
                   std::unique_lock<std::mutex>& lock) {
  const int64_t limit = batch_limit();
  queue.changed.wait_until(lock, deadline, [&] { return queue.rows >= limit; });
  std::vector<std::shared_ptr<Request>> batch;
  batch.swap(queue.waiting);
  queue.rows = 0;
  queue.leader_waiting = false;
  queue.changed.notify_all();  // requests that waited for room may queue now
  run_on_thread(batch, fn, lock, &queue);
  for (const auto& member : batch) member->done = true;
  queue.changed.notify_all();
  lock.unlock();
  for (const auto& member : batch)
    if (member->on_done) member->on_done(std::move(member->outputs), member->error);
  lock.lock();
}

void Batcher::run_async(const std::string& key, NamedTensors inputs, RunFn fn, DoneFn done) {
  const int64_t rows = rows_of(inputs);
  const int64_t limit = batch_limit();
  if (rows > 0 && rows < limit) {
    auto request = std::make_shared<Request>(Request{
        .inputs = std::move(inputs), .rows = rows, .enqueued_at = now_micros(), .on_done = done});
    std::unique_lock lock(mutex_);
    std::shared_ptr<Queue> queue = queue_locked(key);
    if (queue->rows + rows <= limit) {  // room in the batch being gathered (or a new one)
      const Joined joined = join_locked(*queue, request);
      if (joined == Joined::kFull) {
        lock.unlock();
        done({}, std::make_exception_ptr(queue_full(options_.max_enqueued_batches)));
        return;
      }
      if (joined == Joined::kMember) return;  // the leader completes it
      const auto deadline = std::chrono::steady_clock::now() + options_.batch_timeout;
      lock.unlock();
      submit([this, queue, deadline, fn = std::move(fn)] {
        std::unique_lock lock(mutex_);
        lead(*queue, deadline, fn, lock);
      });
      return;
    }
    inputs = std::move(request->inputs);
  }
  // Alone, too large, split, or waiting for room: run()'s way, on a thread of the batcher's.
  submit([this, key, inputs = std::move(inputs), fn = std::move(fn), done = std::move(done)] {
    NamedTensors outputs;
    std::exception_ptr error;
    try {
      outputs = run(key, inputs, fn);
    } catch (...) {
      error = std::current_exception();
    }
    done(std::move(outputs), error);
  });
}

void Batcher::submit(std::function<void()> task) {
  std::lock_guard lock(tasks_mutex_);
  tasks_.push_back(std::move(task));
  if (idle_workers_ >= static_cast<int64_t>(tasks_.size()))
    task_added_.notify_one();
  else
    workers_.emplace_back([this] { worker(); });
}

void Batcher::worker() {
  std::unique_lock lock(tasks_mutex_);
  for (;;) {
    if (tasks_.empty()) {
      if (stopping_) return;
      ++idle_workers_;
      task_added_.wait(lock, [&] { return !tasks_.empty() || stopping_; });
      --idle_workers_;
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

Batcher::~Batcher() {
  {
    std::lock_guard lock(tasks_mutex_);
    stopping_ = true;
  }
  task_added_.notify_all();
  for (std::thread& thread : workers_) thread.join();
}

}  // namespace est::serving
