// A block of device memory shared by tensors, returned to its allocator when the last tensor
// using it goes away.
#pragma once

#include <cstddef>
#include <memory>

#include "ops/allocator.h"
#include "ops/device.h"

namespace est::ops {

class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Allocator* allocator_;
};

}  // namespace est::ops
