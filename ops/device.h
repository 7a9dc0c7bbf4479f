// Where a tensor lives. Parsed from TensorFlow's device strings ("/cpu:0", "/gpu:1",
// "/job:worker/replica:0/task:1/device:GPU:0" keeps only the device part).
#pragma once

#include <string>
#include <string_view>

namespace est::ops {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::kCPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  // Throws InvalidArgumentError naming the string when it is not a device.
  static Device parse(std::string_view name);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;  // "/cpu:0", "/gpu:0"
  bool operator==(const Device&) const = default;
};

}  // namespace est::ops

namespace est {
using ops::Device;
}  // namespace est
