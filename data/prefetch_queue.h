// The producer thread and bounded queue behind prefetch(n) and prefetch_to_device(device, n):
// a background thread calls `produce` (which returns the next item, or nothing at the end) and
// queues up to `capacity` items for pop().
//
// The thread starts on the first pop() and stops on stop() (the owning iterator calls it before
// saving or restoring its state, and on destruction) between two items, so nothing is lost or
// read twice: an item taken from the input is queued even while stopping. An exception from
// `produce` ends the queue; pop() rethrows it after the items before it. The owner reads and
// rewrites the queue (items(), finished(), error(), set_state()) only while the thread is stopped.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace est::data {

template <class Item>
class PrefetchQueue {
 public:
  // The producer sleeps while the queue is full until it is down to `low_water` items, then
  // refills it in one burst; a consumer that finds the queue empty sleeps until it holds
  // `wake_at` items (or the input ends). low_water = capacity - 1 and wake_at = 1 hand over
  // item by item.
  PrefetchQueue(std::function<std::optional<Item>()> produce, size_t capacity, size_t low_water,
                size_t wake_at)
      : produce_(std::move(produce)),
        capacity_(std::max<size_t>(capacity, 1)),
        low_water_(low_water),
        wake_at_(wake_at) {}
  ~PrefetchQueue() { stop(); }
  PrefetchQueue(const PrefetchQueue&) = delete;
  PrefetchQueue& operator=(const PrefetchQueue&) = delete;

  // The next item; nothing at the end; rethrows the input's exception once, in order.
  std::optional<Item> pop() {
    std::unique_lock lock(mutex_);
    if (!worker_.joinable() && !finished_) start_locked();
    not_empty_.wait(lock, [this] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      if (queue_.size() <= low_water_) not_full_.notify_one();
      return item;
    }
    if (error_) {
      std::exception_ptr error = error_;
      error_ = nullptr;
      std::rethrow_exception(error);
    }
    return std::nullopt;
  }

  // Stops the thread between two items; the queue keeps what it holds.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (!worker_.joinable()) return;
      stopping_ = true;
    }
    not_full_.notify_all();
    worker_.join();
    stopping_ = false;
  }

  // While stopped: the queued items, whether the input ended (or failed), and its exception.
  std::deque<Item>& items() { return queue_; }
  bool finished() const { return finished_; }
  const std::exception_ptr& error() const { return error_; }
  void set_state(bool finished, std::exception_ptr error) {
    finished_ = finished;
    error_ = std::move(error);
  }

 private:
  void start_locked() {
    stopping_ = false;
    worker_ = std::thread([this] { run(); });
  }

  void run() {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (queue_.size() >= capacity_)
          not_full_.wait(lock, [this] { return stopping_ || queue_.size() <= low_water_; });
        if (stopping_) return;
      }
      std::optional<Item> item;
      std::exception_ptr error;
      try {
        item = produce_();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      if (item) {
        queue_.push_back(std::move(*item));  // kept even when stopping: it left the input
      } else {
        error_ = std::move(error);  // the thread keeps no reference to the exception
        finished_ = true;
      }
      // With batched wakeups a sleeping consumer is woken, and switched to, once per burst
      // rather than per item. The queue passes wake_at_ on its way to full, so the producer
      // never waits for room while the consumer sleeps.
      if (queue_.size() >= wake_at_ || finished_) not_empty_.notify_one();
      if (finished_) return;
    }
  }

  std::function<std::optional<Item>()> produce_;
  size_t capacity_;
  size_t low_water_;  // the producer resumes when the queue is down to this
  size_t wake_at_;    // a waiting consumer resumes when the queue is up to this
  std::mutex mutex_;
  std::condition_variable not_empty_;  // the consumer waits for items
  std::condition_variable not_full_;   // the producer waits for room
  std::deque<Item> queue_;
  bool finished_ = false;  // the input ended or failed (error_ set)
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace est::data
