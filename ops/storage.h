// A block of device memory shared by tensors, returned to its allocator when the last tensor
// using it goes away. A string tensor's block holds constructed std::string objects (host
// memory only), destroyed with it.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "ops/allocator.h"
#include "ops/device.h"

namespace est::ops {

class Storage {
 public:
  Storage(size_t bytes, Device device);
  // `count` empty strings in host memory.
  static std::shared_ptr<Storage> strings(size_t count);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // Set while a fenced copy (ops/copy_fence.h) still has to read or write this storage.
  std::atomic<bool>& fenced() { return fenced_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Allocator* allocator_;
  size_t strings_ = 0;  // std::string objects constructed in data_
  std::atomic<bool> fenced_{false};
};

}  // namespace est::ops
