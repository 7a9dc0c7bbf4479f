// Batcher: runs concurrent predict requests together (TF Serving's --enable_batching, with its
// max_batch_size and batch_timeout_micros, and the rest of its BatchingParameters:
// max_enqueued_batches, num_batch_threads, allowed_batch_sizes).
//
// Requests with the same key (the servable version, signature, and every input's dtype and row
// shape) join a queue; the first waits until the queue holds max_batch_size rows or
// batch_timeout has passed since it arrived, then runs the whole queue as one batch
// (inputs concatenated along the first dimension) and hands every request its own rows of each
// output. A request larger than max_batch_size runs alone. When an output does not have the
// batch's rows first (a model that reduces over the batch), every request of that batch is run
// on its own instead, so batching never changes an answer. Batches are counted in TF Serving's
// batching_session metrics (serving_metrics.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "export/trace.h"

namespace est::serving {

class Batcher {
 public:
  // TF Serving's BatchingParameters (session_bundle_config.proto), read from
  // --batching_parameters_file by tools/est_serve.cpp.
  struct Options {
    int64_t max_batch_size = 32;
    std::chrono::microseconds batch_timeout{1000};
    // Batches of one key formed and waiting to run, at most; a request that would start
    // another is refused (UnavailableError, as TF's SharedBatchScheduler). 0: no bound.
    int64_t max_enqueued_batches = 0;
    // Batches running at once (of any key), at most; the others wait. 0: no bound.
    int64_t num_batch_threads = 0;
    // Increasing, the last max_batch_size: a batch is padded up to the first size it fits, with
    // copies of its last request's first row (TF's batching_session.cc); the padding's outputs
    // are dropped. Empty: no padding.
    std::vector<int64_t> allowed_batch_sizes;
    std::string thread_pool_name = "model_server_batch_threads";  // the metrics' label
    // Numeric inputs whose dimensions after the first differ batch together, each padded at the
    // end of every dimension to the batch's largest with its first element (TF's
    // batching_util.cc); the outputs keep the padded shape.
    bool pad_variable_length_inputs = false;
  };
  using RunFn = std::function<NamedTensors(const NamedTensors&)>;

  // InvalidArgumentError for options TF Serving refuses (max_batch_size below 1, allowed batch
  // sizes not increasing or whose last is not max_batch_size), naming the field.
  explicit Batcher(Options options);

  // fn(inputs), possibly as part of a larger batch of concurrent calls with the same `key`
  // (which must imply the same fn). Exceptions of fn reach every request of its batch.
  NamedTensors run(const std::string& key, const NamedTensors& inputs, const RunFn& fn);

  // What the key of run() holds for `inputs`: every input's name, dtype and row shape (its rank
  // only, for a numeric input, with pad_variable_length_inputs).
  std::string rows_key(const NamedTensors& inputs) const;

  // Batches run so far (a batch of one included), for tests and logs.
  int64_t batches_run() const;
  // Batches formed or forming that wait to run now (all keys), for tests.
  int64_t batches_enqueued() const;

 private:
  struct Request;
  struct Queue;

  void run_batch(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn);

  // Waits for one of num_batch_threads (when bounded), then runs the batch.
  void run_on_thread(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn,
                     std::unique_lock<std::mutex>& lock, Queue* queue);

  Options options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Queue>> queues_;
  int64_t batches_run_ = 0;
  int64_t batches_running_ = 0;
  std::condition_variable thread_freed_;
};

}  // namespace est::serving
