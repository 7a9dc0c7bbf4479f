// ReplicaPool: one persistent thread per replica, and the barrier replicas meet at.
//
// MirroredStrategy runs each replica's step on its own thread so that replicas compute in
// parallel; the threads live as long as the strategy, so per-thread state (the OpenMP thread
// count each replica is given, oneDNN's per-thread primitive cache) survives across steps.
// A step that throws on one replica aborts the barrier, so the others fail instead of hanging.
// Waits (at the barrier, and for the next step) spin for a few tens of microseconds before
// they sleep: replicas usually arrive close together, and a sleep/wake-up pair costs about as
// much as the wait itself, several times per step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace est::distribute {

// A reusable barrier for `count` threads that can be aborted (waiters then throw AbortedError).
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int count) : count_(count) {}
  void arrive_and_wait();
  void abort();
  void reset();  // clears an abort before the next step

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_;
  int arrived_ = 0;
  // Written under the mutex, read without it while spinning.
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<bool> aborted_ = false;
};

class ReplicaPool {
 public:
  // `threads_per_replica`: the ops::set_num_threads value each replica thread takes.
  ReplicaPool(int num_replicas, int threads_per_replica);
  ~ReplicaPool();
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  AbortableBarrier& barrier() { return barrier_; }

  // Runs task(replica_id) on every replica thread and waits for all of them. Rethrows the
  // first replica's exception (by replica id) after all have finished.
  void run(const std::function<void(int)>& task);

 private:
  void loop(int replica_id, int threads_per_replica);

  std::vector<std::thread> threads_;
  AbortableBarrier barrier_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_ = 0;  // written under the mutex, read while spinning
  int remaining_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;  // one per replica
};

}  // namespace est::distribute
