// The pool's workers: wait for a task, run it, repeat until the pool is destroyed.
#include "data/thread_pool.h"

#include <algorithm>

namespace est::data {

ThreadPool::ThreadPool(int64_t num_threads) {
  int64_t count = std::max<int64_t>(1, num_threads);
  threads_.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) threads_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void ThreadPool::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();  // tasks catch their own exceptions (they report through promises)
  }
}

}  // namespace est::data
