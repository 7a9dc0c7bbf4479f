// The background save thread and the atexit registry that drains it.
#include "checkpoint/async_writer.h"

#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <utility>

#include <hdf5.h>

#include "checkpoint/log.h"
#include "ops/allocator.h"
#include "ops/error.h"

namespace est::checkpoint {
namespace {

// The live writers. Leaked on purpose: it must outlive every static destructor that could
// still own a writer.
struct Registry {
  std::mutex mutex;
  std::set<AsyncWriter*> writers;
};

Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

void drain_all_at_exit() {
  Registry& live = registry();
  std::lock_guard lock(live.mutex);
  for (AsyncWriter* writer : live.writers) writer->drain_and_log();
}

void register_writer(AsyncWriter* writer) {
  static std::once_flag once;
  std::call_once(once, [] {
    // Exit handlers and static destructors run in reverse order of registration and
    // construction. Whatever a save in flight uses must therefore exist before the drain is
    // registered, or it would be torn down under the writer: HDF5 (which registers its own
    // shutdown at initialisation) and the CPU allocator the snapshots return memory to. (The
    // log sink is never destroyed.)
    H5open();
    (void)ops::allocator_for(ops::Device::cpu());
    std::atexit(drain_all_at_exit);
  });
  std::lock_guard lock(registry().mutex);
  registry().writers.insert(writer);
}

void unregister_writer(AsyncWriter* writer) {
  std::lock_guard lock(registry().mutex);
  registry().writers.erase(writer);
}

}  // namespace

AsyncWriter::AsyncWriter(size_t max_in_flight)
    : max_in_flight_(max_in_flight == 0 ? 1 : max_in_flight) {
  thread_ = std::thread([this] { run(); });
  register_writer(this);
}

AsyncWriter::~AsyncWriter() {
  unregister_writer(this);
  drain_and_log();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void AsyncWriter::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // free the snapshot before reporting completion
    lock.lock();
    if (error && !error_) error_ = error;
    --running_;
    changed_.notify_all();
  }
}

void AsyncWriter::rethrow_error_locked(std::unique_lock<std::mutex>& lock) {
  if (!error_) return;
  std::exception_ptr error = std::exchange(error_, nullptr);
  lock.unlock();
  std::rethrow_exception(error);
}

void AsyncWriter::wait_for_room() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return queue_.size() + running_ < max_in_flight_ || error_; });
  rethrow_error_locked(lock);
}

void AsyncWriter::submit(std::function<void()> job) {
  std::unique_lock lock(mutex_);
  rethrow_error_locked(lock);
  queue_.push_back(std::move(job));
  changed_.notify_all();
}

void AsyncWriter::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  rethrow_error_locked(lock);
}

void AsyncWriter::drain_and_log() noexcept {
  try {
    wait();
  } catch (const std::exception& error) {
    log_error(fmt::format("A background checkpoint save failed: {}", error.what()));
  } catch (...) {
    log_error("A background checkpoint save failed with an unknown exception");
  }
}

size_t AsyncWriter::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + running_;
}

}  // namespace est::checkpoint
