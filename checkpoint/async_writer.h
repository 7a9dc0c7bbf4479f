// A background thread that runs save jobs one after another, off the training thread.
//
// The caller snapshots its tensors (deep copies) and submits a job that writes them; at most
// `max_in_flight` jobs are queued or running, so submit() blocks when saves fall behind
// instead of piling up snapshots in memory. An exception thrown by a job is kept and rethrown
// by the next submit() or wait(). Every live writer is registered with an atexit handler, so a
// normal process exit (return from main, std::exit) first finishes the saves in progress;
// the destructor also waits.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace est::checkpoint {

class AsyncWriter {
 public:
  explicit AsyncWriter(size_t max_in_flight = 1);
  ~AsyncWriter();  // waits for every job; an error left unreported is logged
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Blocks until fewer than max_in_flight jobs are pending. Rethrows a stored job error.
  void wait_for_room();
  // Queues `job` (call wait_for_room() first to snapshot only when there is room).
  void submit(std::function<void()> job);
  // Blocks until every job has finished; rethrows the first error a job threw since the last
  // report.
  void wait();
  // Like wait() but logs the error instead of throwing (for destructors and exit).
  void drain_and_log() noexcept;

  size_t pending() const;  // queued or running

 private:
  void run();
  void rethrow_error_locked(std::unique_lock<std::mutex>& lock);

  const size_t max_in_flight_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace est::checkpoint
