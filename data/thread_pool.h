// A small fixed-size thread pool for input pipelines (parallel map).
//
// Input pipelines run on their own threads, apart from the OpenMP threads that the kernels use,
// so reading and decoding overlap with the training step. Tasks run in submission order; the
// destructor finishes the queued tasks before joining.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace est::data {

class ThreadPool {
 public:
  explicit ThreadPool(int64_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task);
  int64_t size() const { return static_cast<int64_t>(threads_.size()); }

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace est::data
