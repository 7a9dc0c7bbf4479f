// Batcher: runs concurrent predict requests together (TF Serving's --enable_batching, with its
// max_batch_size and batch_timeout_micros, and the rest of its BatchingParameters:
// max_enqueued_batches, num_batch_threads, allowed_batch_sizes, enable_large_batch_splitting
// with max_execution_batch_size).
//
// Requests with the same key (the servable version, signature, and every input's dtype and row
// shape) join a queue; the first waits until the queue holds a full batch (max_batch_size rows,
// or max_execution_batch_size with splitting) or batch_timeout has passed since it arrived, then
// runs the whole queue as one batch (inputs concatenated along the first dimension) and hands
// every request its own rows of each output. A request of a full batch runs alone; one larger
// than max_batch_size is refused with TF's message (InvalidArgumentError "Task size N is larger
// than maximum input batch size M", TF's shared_batch_scheduler.h). With
// enable_large_batch_splitting a request larger than what the batch being gathered has room for
// is split as TF's SplitInputTask splits it (batching_session.cc, InputSplitMetadata): its first
// part fills that batch, the rest go in parts of max_execution_batch_size rows, the last joining
// the queue like any request; the parts run one after another on the request's thread, and its
// answer is their outputs concatenated. When an output does not have the batch's rows first (a
// model that reduces over the batch), every request of that batch is run on its own instead, and
// a split request is run whole, so batching never changes an answer. Batches are counted in TF
// Serving's batching_session metrics (serving_metrics.h).
//
// run_async() is run() for a caller that must not wait (gRPC's callback API): a request that
// joins a batch being gathered returns at once and its completion runs on the thread that runs
// the batch; one that starts a batch hands the wait to a thread of the batcher's own (created
// as needed and kept), as does one that runs alone, is split, or waits for room.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
    // Requests of more rows than a batch has room for are split (above), batches running at
    // most max_execution_batch_size rows (0: max_batch_size; above max_batch_size is refused,
    // as TF's SharedBatchScheduler::AddQueue refuses it).
    bool enable_large_batch_splitting = false;
    int64_t max_execution_batch_size = 0;
  };
  using RunFn = std::function<NamedTensors(const NamedTensors&)>;
  // A request's answer: its outputs, or (outputs empty) the error run() would have thrown.
  using DoneFn = std::function<void(NamedTensors outputs, std::exception_ptr error)>;

  // InvalidArgumentError for options TF Serving refuses (max_batch_size below 1, allowed batch
  // sizes not increasing or whose last is not max_batch_size, max_execution_batch_size below 0
  // or above max_batch_size with splitting), naming the field.
  explicit Batcher(Options options);
  // Waits for the requests of run_async() still running.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // fn(inputs), possibly as part of a larger batch of concurrent calls with the same `key`
  // (which must imply the same fn). Exceptions of fn reach every request of its batch.
  NamedTensors run(const std::string& key, const NamedTensors& inputs, const RunFn& fn);
  // run() without waiting: done(outputs or the error) is called once, on this thread before
  // run_async returns, on a thread that runs the batch, or on one of the batcher's (above).
  // `done` must not throw.
  void run_async(const std::string& key, NamedTensors inputs, RunFn fn, DoneFn done);

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

  // The largest batch run: max_execution_batch_size with splitting, else max_batch_size.
  int64_t batch_limit() const;
  // run() of a request of `rows` rows (at most max_batch_size): alone when it fills a batch,
  // else through its key's queue.
  NamedTensors run_request(const std::string& key, const NamedTensors& inputs, int64_t rows,
                           const RunFn& fn);
  // `request` run as a batch of its own (when one of num_batch_threads is free).
  NamedTensors run_own_batch(const std::shared_ptr<Request>& request, const RunFn& fn);
  // run() of a request split into parts of `sizes` rows (splitting; see above).
  NamedTensors run_split(const std::string& key, const NamedTensors& inputs,
                         const std::vector<int64_t>& sizes, const RunFn& fn);

  void run_batch(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn);
  // With mutex_ held: `key`'s queue, made on first use.
  std::shared_ptr<Queue> queue_locked(const std::string& key);
  // With mutex_ held: whether `request` would start a batch past max_enqueued_batches (TF's
  // "queue is full"), else queues it in the batch being gathered and says whether the caller
  // now leads that batch (its first request: the batch then counts as enqueued).
  enum class Joined { kFull, kLeader, kMember };
  Joined join_locked(Queue& queue, const std::shared_ptr<Request>& request);
  // The batch leader's part (with `lock` held, `request` first in `queue`): waits until the
  // batch is full or `deadline`, runs it, and completes its run_async() requests (without the
  // lock, which it holds again on return).
  void lead(Queue& queue, std::chrono::steady_clock::time_point deadline, const RunFn& fn,
            std::unique_lock<std::mutex>& lock);
  // `task` on a thread of the batcher's: an idle one, or a new one.
  void submit(std::function<void()> task);
  void worker();

  // Waits for one of num_batch_threads (when bounded), then runs the batch.
  void run_on_thread(std::vector<std::shared_ptr<Request>> batch, const RunFn& fn,
                     std::unique_lock<std::mutex>& lock, Queue* queue);

  Options options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Queue>> queues_;
  int64_t batches_run_ = 0;
  int64_t batches_running_ = 0;
  std::condition_variable thread_freed_;

  // The threads of run_async()'s waits (submit()).
  std::mutex tasks_mutex_;
  std::condition_variable task_added_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
  int64_t idle_workers_ = 0;
  bool stopping_ = false;
};

}  // namespace est::serving
