// Batcher: runs concurrent predict requests together (TF Serving's --enable_batching, with its
// max_batch_size and batch_timeout_micros).
//
// Requests with the same key (the servable version, signature, and every input's dtype and row
// shape) join a queue; the first waits until the queue holds max_batch_size rows or
// batch_timeout has passed since it arrived, then runs the whole queue as one batch
// (inputs concatenated along the first dimension) and hands every request its own rows of each
// output. A request larger than max_batch_size runs alone. When an output does not have the
// batch's rows first (a model that reduces over the batch), every request of that batch is run
// on its own instead, so batching never changes an answer.
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
  struct Options {
    int64_t max_batch_size = 32;
    std::chrono::microseconds batch_timeout{1000};
  };
  using RunFn = std::function<NamedTensors(const NamedTensors&)>;

  explicit Batcher(Options options);

  // fn(inputs), possibly as part of a larger batch of concurrent calls with the same `key`
  // (which must imply the same fn). Exceptions of fn reach every request of its batch.
  NamedTensors run(const std::string& key, const NamedTensors& inputs, const RunFn& fn);

  // Batches run so far (a batch of one included), for tests and logs.
  int64_t batches_run() const;

 private:
  struct Request;
  struct Queue;

  void run_batch(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn);

  Options options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Queue>> queues_;
  int64_t batches_run_ = 0;
};

}  // namespace est::serving
