// Library handles (cuBLAS) lent to threads per device and given back when a thread ends, after
// PyTorch's DeviceThreadHandlePool (aten/src/ATen/cuda/detail/DeviceThreadHandles.h): a handle
// is not thread-safe, so each thread needs its own, but a handle created per thread and never
// destroyed leaks one handle and its workspace per replica thread that a strategy starts. Here
// a thread's handles live in a ThreadHandles it owns (a thread_local of the caller), whose
// destructor returns them to the pool; the next thread takes them over, so a process holds as
// many handles as it ever ran threads at once. The pool is shared with every ThreadHandles, so
// that a thread ending after the pool's owner is gone still has somewhere to return to; handles
// still in the pool at exit are left to the driver (destroying them then could run after the
// library was unloaded). Host code with no CUDA type (Handle is any copyable value), tested with
// plain integers in tests/ops/cuda_plans_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace est::ops::cuda {

template <class Handle>
class HandlePool {
 public:
  // `create(device)` makes a new handle for `device` (throws on failure).
  explicit HandlePool(std::function<Handle(int)> create) : create_(std::move(create)) {}

  Handle acquire(int device) {
    {
      std::lock_guard lock(mutex_);
      std::vector<Handle>& free = free_[device];
      if (!free.empty()) {
        Handle handle = free.back();
        free.pop_back();
        return handle;
      }
    }
    Handle handle = create_(device);
    std::lock_guard lock(mutex_);
    ++created_;
    return handle;
  }

  void release(int device, Handle handle) {
    std::lock_guard lock(mutex_);
    free_[device].push_back(handle);
  }

  int64_t created() const {  // handles made so far, all devices
    std::lock_guard lock(mutex_);
    return created_;
  }
  size_t available(int device) const {  // handles in the pool, not lent
    std::lock_guard lock(mutex_);
    auto it = free_.find(device);
    return it == free_.end() ? 0 : it->second.size();
  }

 private:
  std::function<Handle(int)> create_;
  mutable std::mutex mutex_;
  std::map<int, std::vector<Handle>> free_;
  int64_t created_ = 0;
};

// One thread's handles, one per device, taken from `pool` on first use and returned when this
// object is destroyed (with the thread, when it is a thread_local).
template <class Handle>
class ThreadHandles {
 public:
  explicit ThreadHandles(std::shared_ptr<HandlePool<Handle>> pool) : pool_(std::move(pool)) {}
  ~ThreadHandles() {
    for (const auto& [device, handle] : held_) pool_->release(device, handle);
  }
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;

  Handle get(int device) {
    auto it = held_.find(device);
    if (it == held_.end()) it = held_.emplace(device, pool_->acquire(device)).first;
    return it->second;
  }

 private:
  std::shared_ptr<HandlePool<Handle>> pool_;
  std::map<int, Handle> held_;
};

}  // namespace est::ops::cuda
