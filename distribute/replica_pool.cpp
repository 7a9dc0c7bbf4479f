// ReplicaPool and AbortableBarrier: a generation counter wakes the replica threads for each
// step; the caller waits until every replica has reported back.
#include "distribute/replica_pool.h"

#include <chrono>

#include "ops/backend.h"
#include "ops/error.h"

namespace est::distribute {
namespace {

// How long a waiting replica thread spins before it sleeps on a condition variable.
constexpr auto kSpinBudget = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `done()` or the budget is spent; true when done.
template <class Done>
bool spin_until(const Done& done) {
  auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

void AbortableBarrier::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (aborted_)
    throw AbortedError("replica barrier: another replica failed during this step; see its error");
  uint64_t generation = generation_;
  if (++arrived_ == count_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  auto released = [&] { return generation_ != generation || aborted_; };
  lock.unlock();
  spin_until(released);
  lock.lock();
  cv_.wait(lock, released);
  if (generation_ == generation)
    throw AbortedError("replica barrier: another replica failed during this step; see its error");
}

void AbortableBarrier::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void AbortableBarrier::reset() {
  std::lock_guard lock(mutex_);
  aborted_ = false;
  arrived_ = 0;
}

ReplicaPool::ReplicaPool(int num_replicas, int threads_per_replica)
    : barrier_(num_replicas), errors_(static_cast<size_t>(num_replicas)) {
  threads_.reserve(static_cast<size_t>(num_replicas));
  for (int r = 0; r < num_replicas; ++r)
    threads_.emplace_back([this, r, threads_per_replica] { loop(r, threads_per_replica); });
}

ReplicaPool::~ReplicaPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ReplicaPool::run(const std::function<void(int)>& task) {
  std::unique_lock lock(mutex_);
  barrier_.reset();
  for (auto& error : errors_) error = nullptr;
  task_ = &task;
  remaining_ = size();
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return remaining_ == 0; });
  task_ = nullptr;
  // The root cause first: an AbortedError only says another replica failed.
  for (auto& error : errors_) {
    if (!error) continue;
    try {
      std::rethrow_exception(error);
    } catch (const AbortedError&) {
      continue;
    } catch (...) {
      throw;
    }
  }
  for (auto& error : errors_)
    if (error) std::rethrow_exception(error);
}

void ReplicaPool::loop(int replica_id, int threads_per_replica) {
  ops::set_num_threads(threads_per_replica);
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* task;
    spin_until([&] { return generation_ != seen; });
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(replica_id);
    } catch (...) {
      error = std::current_exception();
      barrier_.abort();
    }
    std::lock_guard lock(mutex_);
    errors_[static_cast<size_t>(replica_id)] = error;
    if (--remaining_ == 0) done_cv_.notify_all();
  }
}

}  // namespace est::distribute
